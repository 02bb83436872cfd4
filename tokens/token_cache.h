// A token file: every document's ids followed by EOS, as uint16 (a vocabulary up to 65536) or int32, with the
// documents' offsets, written once and memory-mapped read-only, so every run and every data-parallel rank
// reads the same pages and none re-encodes.
//
// Layout (little-endian): a 64-byte header (magic "SINKTOKS", version, width, documents, tokens, vocab, bos,
// eos, the cache key's 64-bit hash, a hash of the header), the tokens, zero padding to 8 bytes, then
// documents + 1 uint64 offsets (where each document starts; the last is the token count).
#pragma once
#include <cstdint>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace sink::tokens {

// A read-only run of token ids: a slice of a mapped file, or of memory.
class TokenSpan {
 public:
  TokenSpan() = default;
  TokenSpan(std::shared_ptr<const void> owner, const void* data, int width, size_t size)
      : owner_(std::move(owner)), data_(data), width_(width), size_(size) {}
  static TokenSpan of(std::vector<int32_t> ids);

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int width() const { return width_; }
  int32_t operator[](size_t k) const {
    return width_ == 2 ? static_cast<const uint16_t*>(data_)[k] : static_cast<const int32_t*>(data_)[k];
  }
  TokenSpan slice(size_t begin, size_t end) const;
  std::vector<int32_t> to_vector() const;

  class iterator {
   public:
    using iterator_category = std::random_access_iterator_tag;
    using value_type = int32_t;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = int32_t;
    iterator() = default;
    iterator(const TokenSpan* span, size_t at) : span_(span), at_(at) {}
    int32_t operator*() const { return (*span_)[at_]; }
    int32_t operator[](difference_type n) const { return (*span_)[at_ + n]; }
    iterator& operator++() { return ++at_, *this; }
    iterator operator++(int) { return {span_, at_++}; }
    iterator& operator--() { return --at_, *this; }
    iterator& operator+=(difference_type n) { return at_ += n, *this; }
    iterator operator+(difference_type n) const { return {span_, at_ + n}; }
    iterator operator-(difference_type n) const { return {span_, at_ - n}; }
    difference_type operator-(const iterator& o) const { return difference_type(at_) - difference_type(o.at_); }
    bool operator==(const iterator& o) const { return at_ == o.at_; }
    bool operator!=(const iterator& o) const { return at_ != o.at_; }
    bool operator<(const iterator& o) const { return at_ < o.at_; }

   private:
    const TokenSpan* span_ = nullptr;
    size_t at_ = 0;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size_}; }

 private:
  std::shared_ptr<const void> owner_;  // the mapping or the vector
  const void* data_ = nullptr;
  int width_ = 4;
  size_t size_ = 0;
};

// A 128-bit content hash, as 32 hex digits: cache keys and corpus fingerprints (not cryptographic).
class Hasher {
 public:
  void add(const void* data, size_t n);
  void add(const std::string& s) { add(s.data(), s.size()); }
  std::string hex() const;
  uint64_t low() const;

 private:
  uint64_t a_ = 0x9E3779B97F4A7C15ull, b_ = 0xC2B2AE3D27D4EB4Full, n_ = 0;
};

// A file's fingerprint: its size and a hash of its bytes, all of them up to 64 MiB, else of 64 windows of
// 256 KiB spread evenly over it (so a Pile shard costs 16 MiB of reading, not its size).
std::string file_fingerprint(const std::string& path);

struct TokenFileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A token file mapped read-only. Throws TokenFileError saying what is wrong: not a token file, another
// version's, for another key, truncated, or damaged.
struct TokenFile {
  TokenSpan tokens;  // every document followed by EOS
  uint64_t documents = 0;
  int64_t vocab = 0;
  int32_t bos = -1, eos = -1;
  uint64_t document_start(uint64_t k) const { return offsets_[k]; }  // k <= documents
  static TokenFile open(const std::string& path, uint64_t key_hash);

 private:
  std::shared_ptr<const void> mapping_;
  const uint64_t* offsets_ = nullptr;
};

// Writes a token file document by document; finish() writes the offsets and the header and syncs it to disk.
class TokenFileWriter {
 public:
  TokenFileWriter(const std::string& path, int64_t vocab, int32_t bos, int32_t eos, uint64_t key_hash);
  ~TokenFileWriter();
  void add(const std::vector<int32_t>& ids);  // one document; EOS is appended
  void finish();
  uint64_t tokens() const { return tokens_; }

 private:
  void write(const void* data, size_t n);
  std::string path_;
  int fd_ = -1;
  int width_;
  int64_t vocab_;
  int32_t bos_, eos_;
  uint64_t key_hash_, tokens_ = 0;
  std::vector<uint64_t> offsets_{0};
  std::vector<char> buffer_;
};

}  // namespace sink::tokens
