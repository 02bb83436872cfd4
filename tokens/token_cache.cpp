#include "tokens/token_cache.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sink::tokens {

namespace {

constexpr char kMagic[8] = {'S', 'I', 'N', 'K', 'T', 'O', 'K', 'S'};
constexpr uint32_t kVersion = 1;

struct Header {
  char magic[8];
  uint32_t version, width;
  uint64_t documents, tokens;
  int64_t vocab;
  int32_t bos, eos;
  uint64_t key_hash, check;
};
static_assert(sizeof(Header) == 64);

uint64_t header_check(const Header& h) {
  Hasher hash;
  hash.add(&h, offsetof(Header, check));
  return hash.low();
}

uint64_t padded(uint64_t bytes) { return (bytes + 7) / 8 * 8; }

uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

}  // namespace

TokenSpan TokenSpan::of(std::vector<int32_t> ids) {
  auto owned = std::make_shared<std::vector<int32_t>>(std::move(ids));
  const void* data = owned->data();
  const size_t n = owned->size();
  return TokenSpan(std::shared_ptr<const void>(owned, data), data, 4, n);
}

TokenSpan TokenSpan::slice(size_t begin, size_t end) const {
  end = std::min(end, size_);
  begin = std::min(begin, end);
  return TokenSpan(owner_, static_cast<const char*>(data_) + begin * width_, width_, end - begin);
}

std::vector<int32_t> TokenSpan::to_vector() const { return {begin(), end()}; }

void Hasher::add(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  n_ += n;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    a_ = rotl(a_ ^ (w * 0x87c37b91114253d5ull), 31) * 0x4cf5ad432745937full;
    b_ = rotl(b_ + w, 27) * 0x100000001b3ull ^ a_;
  }
  // The tail, with its length, so that "ab" + "c" and "a" + "bc" differ from each other only as content does.
  uint64_t w = 0;
  std::memcpy(&w, p, n);
  a_ = rotl(a_ ^ (w * 0x87c37b91114253d5ull) ^ n, 31) * 0x4cf5ad432745937full;
  b_ = rotl(b_ + w + (n << 56), 27) * 0x100000001b3ull ^ a_;
}

uint64_t Hasher::low() const { return mix(a_ ^ mix(n_)); }

std::string Hasher::hex() const { return fmt::format("{:016x}{:016x}", low(), mix(b_ + a_ + n_)); }

std::string file_fingerprint(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat st{};
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0) close(fd);
    throw std::runtime_error(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  constexpr uint64_t kWhole = 64ull << 20, kWindow = 256ull << 10, kWindows = 64;
  Hasher h;
  std::vector<char> buf(1 << 20);
  auto hash_range = [&](uint64_t at, uint64_t n) {
    while (n > 0) {
      const ssize_t got = pread(fd, buf.data(), std::min<uint64_t>(n, buf.size()), static_cast<off_t>(at));
      if (got <= 0) {
        close(fd);
        throw std::runtime_error(fmt::format("cannot read '{}' (it changed while being read?)", path));
      }
      h.add(buf.data(), static_cast<size_t>(got));
      at += static_cast<uint64_t>(got), n -= static_cast<uint64_t>(got);
    }
  };
  if (size <= kWhole)
    hash_range(0, size);
  else
    for (uint64_t k = 0; k < kWindows; ++k) hash_range(k * (size - kWindow) / (kWindows - 1), kWindow);
  close(fd);
  return fmt::format("{} {}", size, h.hex());
}

TokenFile TokenFile::open(const std::string& path, uint64_t key_hash) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw TokenFileError(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  struct stat st{};
  fstat(fd, &st);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < sizeof(Header)) {
    close(fd);
    throw TokenFileError(fmt::format("'{}' is not a token file ({} bytes, shorter than its header)", path, size));
  }
  void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) throw TokenFileError(fmt::format("cannot map '{}': {}", path, std::strerror(errno)));
  std::shared_ptr<const void> mapping(map, [size](const void* p) { munmap(const_cast<void*>(p), size); });
  Header h;
  std::memcpy(&h, map, sizeof h);
  if (std::memcmp(h.magic, kMagic, 8) != 0) throw TokenFileError(fmt::format("'{}' is not a token file", path));
  if (h.version != kVersion)
    throw TokenFileError(
        fmt::format("'{}' is a version {} token file; this sinklab reads version {}", path, h.version, kVersion));
  if (h.check != header_check(h) || (h.width != 2 && h.width != 4) || h.documents > size || h.tokens > size)
    throw TokenFileError(fmt::format("'{}' has a damaged header", path));
  if (h.key_hash != key_hash)
    throw TokenFileError(fmt::format("'{}' holds the tokens of another corpus or tokenizer", path));
  const uint64_t body = padded(h.tokens * h.width), expected = sizeof(Header) + body + 8 * (h.documents + 1);
  if (size != expected)
    throw TokenFileError(
        fmt::format("'{}' is truncated or damaged: {} bytes where its header says {}", path, size, expected));
  TokenFile f;
  f.mapping_ = mapping;
  const char* base = static_cast<const char*>(map);
  f.offsets_ = reinterpret_cast<const uint64_t*>(base + sizeof(Header) + body);
  if (f.offsets_[0] != 0 || f.offsets_[h.documents] != h.tokens)
    throw TokenFileError(fmt::format("'{}' has damaged document offsets", path));
  f.tokens = TokenSpan(mapping, base + sizeof(Header), static_cast<int>(h.width), h.tokens);
  f.documents = h.documents;
  f.vocab = h.vocab;
  f.bos = h.bos;
  f.eos = h.eos;
  // Read front to back by the batches' random chunks: no read-ahead wasted on a sequential guess.
  madvise(map, size, MADV_RANDOM);
  return f;
}

TokenFileWriter::TokenFileWriter(const std::string& path, int64_t vocab, int32_t bos, int32_t eos, uint64_t key_hash)
    : path_(path), width_(vocab <= 65536 ? 2 : 4), vocab_(vocab), bos_(bos), eos_(eos), key_hash_(key_hash) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw std::runtime_error(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
  const Header blank{};
  write(&blank, sizeof blank);
}

TokenFileWriter::~TokenFileWriter() {
  if (fd_ >= 0) close(fd_);
}

void TokenFileWriter::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t put = ::write(fd_, p, n);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) throw std::runtime_error(fmt::format("cannot write '{}': {}", path_, std::strerror(errno)));
    p += put, n -= static_cast<size_t>(put);
  }
}

void TokenFileWriter::add(const std::vector<int32_t>& ids) {
  auto put = [&](int32_t id) {
    if (id < 0 || id >= vocab_)
      throw std::runtime_error(fmt::format("token id {} is outside the tokenizer's vocabulary ({})", id, vocab_));
    const char* p = reinterpret_cast<const char*>(&id);
    uint16_t narrow = static_cast<uint16_t>(id);
    if (width_ == 2) p = reinterpret_cast<const char*>(&narrow);
    buffer_.insert(buffer_.end(), p, p + width_);
  };
  for (int32_t id : ids) put(id);
  put(eos_);
  tokens_ += ids.size() + 1;
  offsets_.push_back(tokens_);
  if (buffer_.size() >= (8u << 20)) write(buffer_.data(), buffer_.size()), buffer_.clear();
}

void TokenFileWriter::finish() {
  buffer_.resize(buffer_.size() + (padded(tokens_ * width_) - tokens_ * width_), 0);
  write(buffer_.data(), buffer_.size());
  buffer_.clear();
  write(offsets_.data(), offsets_.size() * 8);
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kVersion;
  h.width = static_cast<uint32_t>(width_);
  h.documents = offsets_.size() - 1;
  h.tokens = tokens_;
  h.vocab = vocab_;
  h.bos = bos_;
  h.eos = eos_;
  h.key_hash = key_hash_;
  h.check = header_check(h);
  if (pwrite(fd_, &h, sizeof h, 0) != static_cast<ssize_t>(sizeof h) || fsync(fd_) != 0 || close(fd_) != 0) {
    fd_ = -1;
    throw std::runtime_error(fmt::format("cannot write '{}': {}", path_, std::strerror(errno)));
  }
  fd_ = -1;
}

}  // namespace sink::tokens
