#include "results/tfevents.h"

#include <array>
#include <chrono>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <unistd.h>

namespace sink::tfevents {
namespace {

// The reflected polynomial 0x1EDC6F41, a byte at a time.
const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? 0x82F63B78u : 0u);
      t[n] = c;
    }
    return t;
  }();
  return table;
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

// Protobuf's wire format: a key (field number << 3 | wire type), then a varint (type 0), eight bytes
// (type 1), a length and bytes (type 2) or four bytes (type 5); little-endian.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) out.push_back(static_cast<char>((v & 0x7F) | 0x80)), v >>= 7;
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, int field, int wire_type) { put_varint(out, (uint64_t(field) << 3) | wire_type); }
void put_double(std::string& out, int field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, 1);
  put_le(out, bits, 8);
}
void put_float(std::string& out, int field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, 5);
  put_le(out, bits, 4);
}
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

// A TFRecord: length (u64), its masked CRC (u32), the bytes, their masked CRC (u32).
std::string framed(const std::string& data) {
  std::string out, header;
  put_le(header, data.size(), 8);
  out += header;
  put_le(out, masked_crc32c(header.data(), header.size()), 4);
  out += data;
  put_le(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || !host[0]) return "localhost";
  return host;
}

}  // namespace

uint32_t crc32c(const void* data, size_t size) {
  const auto& table = crc_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

// Event: wall_time 1 (double), step 2 (int64), file_version 3 (string), summary 5 (Summary).
std::string file_version_record(double wall_time) {
  std::string event;
  put_double(event, 1, wall_time);
  put_bytes(event, 3, "brain.Event:2");
  return framed(event);
}

// Summary: value 1 (repeated Value); Value: tag 1 (string), simple_value 2 (float, written even when 0: in
// TensorBoard's schema it is a member of a oneof, and a point without it has no value).
std::string scalars_record(double wall_time, int64_t step, const Scalars& values) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string v;
    put_bytes(v, 1, tag);
    put_float(v, 2, static_cast<float>(value));
    put_bytes(summary, 1, v);
  }
  std::string event;
  put_double(event, 1, wall_time);
  if (step != 0) put_key(event, 2, 0), put_varint(event, static_cast<uint64_t>(step));
  put_bytes(event, 5, summary);
  return framed(event);
}

std::string event_file_name(double wall_time) {
  return kFilePrefix + std::to_string(static_cast<int64_t>(wall_time)) + "." + host_name();
}

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void EventLog::add(int64_t step, const Scalars& values) {
  const double now = wall_time_now();
  std::string bytes;
  if (path_.empty()) {
    path_ = folder_ + "/" + event_file_name(now);
    bytes = file_version_record(now);
  }
  bytes += scalars_record(now, step, values);
  std::ofstream f(path_, std::ios::binary | std::ios::app);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f.flush()) throw std::runtime_error("cannot append to " + path_);
}

}  // namespace sink::tfevents
