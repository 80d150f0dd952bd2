// What ranks send each other (RankLink), packed: trivially copyable values as their bytes (the
// ranks of a run are one build on one architecture), vectors and strings with their length.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace spraynet::fabric {

class ByteWriter {
 public:
  template <class T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void put_bytes(const void* p, size_t n) {
    put<uint64_t>(n);
    out_.append(static_cast<const char*>(p), n);
  }
  void put_string(std::string_view s) { put_bytes(s.data(), s.size()); }
  template <class T>
  void put_vector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put_bytes(v.data(), v.size() * sizeof(T));
  }
  std::string& str() { return out_; }

 private:
  std::string out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    std::memcpy(&v, take(sizeof(T)), sizeof(T));
    return v;
  }
  std::string_view get_bytes() {
    const auto n = get<uint64_t>();
    return {take(n), n};
  }
  std::string get_string() { return std::string(get_bytes()); }
  template <class T>
  std::vector<T> get_vector() {
    const std::string_view b = get_bytes();
    std::vector<T> v(b.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
    return v;
  }
  bool done() const { return at_ == in_.size(); }

 private:
  const char* take(size_t n) {
    if (n > in_.size() - at_) throw std::runtime_error("rank message cut short");
    const char* p = in_.data() + at_;
    at_ += n;
    return p;
  }
  std::string_view in_;
  size_t at_ = 0;
};

}  // namespace spraynet::fabric
