#include "control/telemetry_client.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <vector>

namespace spraynet::control {

namespace {

// Closes the socket on every return path.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string failed(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

// Reads one message; an empty optional-like: false with `error` set.
bool receive(int fd, std::vector<char>& buf, std::string& out, std::string& error,
             const char* what) {
  const ssize_t n = ::recv(fd, buf.data(), buf.size(), 0);
  if (n < 0) {
    error = failed(std::string("reading the ") + what);
    return false;
  }
  if (n == 0) {
    error = std::string("the switch closed the socket before the ") + what;
    return false;
  }
  out.assign(buf.data(), static_cast<size_t>(n));
  return true;
}

}  // namespace

TelemetryReply telemetry_request(const std::string& socket_path, const std::string& request,
                                 uint64_t timeout_ms) {
  TelemetryReply r;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    r.error = "socket path longer than " + std::to_string(sizeof(addr.sun_path) - 1) + " bytes";
    return r;
  }
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  Fd s{::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)};
  if (s.fd < 0) {
    r.error = failed("socket");
    return r;
  }
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout_ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout_ms % 1000) * 1000);
  ::setsockopt(s.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(s.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (::connect(s.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    r.error = failed("connect " + socket_path);
    return r;
  }
  std::vector<char> buf(16384);
  std::string greeting;
  if (!receive(s.fd, buf, greeting, r.error, "greeting")) return r;
  const auto g = nlohmann::json::parse(greeting, nullptr, false);
  if (!g.is_object() || !g.contains("max_output_len") ||
      !g["max_output_len"].is_number_unsigned()) {
    r.error = "not a DPDK telemetry v2 greeting: " + greeting.substr(0, 200);
    return r;
  }
  buf.resize(g["max_output_len"].get<size_t>() + 1);
  if (::send(s.fd, request.data(), request.size(), 0) != static_cast<ssize_t>(request.size())) {
    r.error = failed("sending the request");
    return r;
  }
  if (!receive(s.fd, buf, r.text, r.error, "reply")) return r;
  r.ok = true;
  return r;
}

}  // namespace spraynet::control
