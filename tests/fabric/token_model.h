// A toy model for the conservative kernel (fabric/kernel/): tokens passed around a ring or across
// a mesh of LPs, each hop at least one lookahead later, sometimes resting at an LP first; each LP
// records what it served. run_sequential() is the same toy on one plain event list, the
// reference every kernel run must match. Used by test_kernel.cc and kernel_mpi_toy.cc.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <queue>
#include <tuple>
#include <vector>

#include "fabric/kernel/conservative_kernel.h"

namespace spraynet::fabric::toy {

inline uint64_t mix(
    uint64_t x) {  // splitmix64's finaliser: the toy's "random" choices, reproducible
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

struct Token {
  uint32_t id = 0;
  uint32_t hop = 0;
};

enum class Shape { kRing, kMesh };

// What a token does when an LP serves it: rests (an event of the same LP later) or moves on (a
// message to the next LP, or any LP in the mesh, itself included, a lookahead or more later).
struct Step {
  bool rest;
  uint64_t delay;
  uint32_t to;
};
inline Step step_of(Shape shape, uint32_t lps, uint64_t lookahead, uint32_t at, const Token& k) {
  const uint64_t h = mix(uint64_t{k.id} << 32 | k.hop);
  if (h % 4 == 0) return {true, h % 7, at};  // a rest of 0 to 6 ns
  const uint32_t to =
      shape == Shape::kRing ? (at + 1) % lps : static_cast<uint32_t>((h >> 8) % lps);
  return {false, lookahead + (h >> 20) % 5, to};
}

struct TraceEntry {
  uint64_t t;
  uint32_t token, hop;
  bool from_mail;
  bool operator==(const TraceEntry&) const = default;
};
using Traces = std::vector<std::vector<TraceEntry>>;

// The model: per LP, a queue of resting tokens by (time, local sequence).
class TokenModel : public ConservativeKernel<Token>::Model {
 public:
  using Kernel = ConservativeKernel<Token>;
  TokenModel(Shape shape, uint32_t lps, uint64_t lookahead)
      : shape_(shape), lookahead_(lookahead), queues_(lps), seq_(lps, 0), traces_(lps) {}
  void attach(Kernel* k) { kernel_ = k; }
  void rest(uint32_t lp, uint64_t t, Token k) { queues_[lp].push(Rest{t, seq_[lp]++, k}); }
  const Traces& traces() const { return traces_; }

  uint64_t next_event(uint32_t lp) override {
    return queues_[lp].empty() ? kKernelNever : queues_[lp].top().t;
  }
  void serve_next(uint32_t lp) override {
    const Rest r = queues_[lp].top();
    queues_[lp].pop();
    handle(lp, r.token, false);
  }
  void deliver_due(uint32_t lp) override {
    const uint64_t t = kernel_->now(lp);
    while (!kernel_->mail_empty(lp) && kernel_->mail_front(lp).t == t) {
      handle(lp, kernel_->pop_mail(lp).body, true);
    }
  }
  void end_round(uint32_t /*lp*/) override {}
  void pack(ByteWriter& w, const Token& k) override {
    w.put(k.id);
    w.put(k.hop);
  }
  Token unpack(ByteReader& r) override {
    Token k;
    k.id = r.get<uint32_t>();
    k.hop = r.get<uint32_t>();
    return k;
  }

 private:
  struct Rest {
    uint64_t t, seq;
    Token token;
    bool operator>(const Rest& o) const { return std::tie(t, seq) > std::tie(o.t, o.seq); }
  };
  void handle(uint32_t lp, Token k, bool from_mail) {
    const uint64_t now = kernel_->now(lp);
    traces_[lp].push_back({now, k.id, k.hop, from_mail});
    const Step s = step_of(shape_, static_cast<uint32_t>(queues_.size()), lookahead_, lp, k);
    ++k.hop;
    if (s.rest) {
      rest(lp, now + s.delay, k);
    } else {
      kernel_->send(lp, s.to, now + s.delay, k);
    }
  }
  Shape shape_;
  uint64_t lookahead_;
  Kernel* kernel_ = nullptr;
  std::vector<std::priority_queue<Rest, std::vector<Rest>, std::greater<>>> queues_;
  std::vector<uint64_t> seq_;
  Traces traces_;
};

inline constexpr uint64_t kLookahead = 10;
inline constexpr uint64_t kEnd = 2000;

// The toy on the kernel, on `threads` threads; with `ranks`, this rank's LPs only (the others'
// traces stay empty), the earliest time reduced over the ranks every round.
inline Traces run_kernel(Shape shape, uint32_t lps, uint32_t tokens, uint32_t threads,
                         RankLink* ranks = nullptr) {
  TokenModel model(shape, lps, kLookahead);
  ConservativeKernel<Token> kernel(lps, model);
  model.attach(&kernel);
  kernel.set_ranks(ranks);
  kernel.set_threads(threads);
  for (uint32_t i = 0; i < tokens; ++i) model.rest(i % lps, i % 3, Token{i, 0});
  for (;;) {
    std::array<uint64_t, 1> t{kernel.earliest_here()};
    if (kernel.distributed()) ranks->reduce(t, {});
    if (t[0] > kEnd) break;
    kernel.run_round(std::min(kEnd + 1, t[0] + kLookahead));
  }
  kernel.clear_mail([](Token&) {});
  Traces traces = model.traces();
  for (uint32_t lp = 0; lp < lps; ++lp) {
    if (!kernel.mine(lp)) traces[lp].clear();
  }
  return traces;
}

// The same toy on one global event list, in the kernel's order: time, then at one LP and time
// its mail (by source LP and the source's own sequence) before its resting tokens (by rest
// order). Written without the kernel, as the reference.
inline Traces run_sequential(Shape shape, uint32_t lps, uint32_t tokens) {
  struct Ev {
    uint64_t t;
    uint32_t lp;
    int kind;    // 0: mail, 1: rest
    uint64_t a;  // mail: source LP; rest: local sequence
    uint64_t b;  // mail: the source's sequence
    Token token;
    bool operator>(const Ev& o) const {
      return std::tie(t, lp, kind, a, b) > std::tie(o.t, o.lp, o.kind, o.a, o.b);
    }
  };
  std::priority_queue<Ev, std::vector<Ev>, std::greater<>> q;
  std::vector<uint64_t> rest_seq(lps, 0), send_seq(lps, 0);
  for (uint32_t i = 0; i < tokens; ++i) {
    const uint32_t lp = i % lps;
    q.push(Ev{i % 3, lp, 1, rest_seq[lp]++, 0, Token{i, 0}});
  }
  Traces traces(lps);
  while (!q.empty() && q.top().t <= kEnd) {
    const Ev e = q.top();
    q.pop();
    traces[e.lp].push_back({e.t, e.token.id, e.token.hop, e.kind == 0});
    const Step s = step_of(shape, lps, kLookahead, e.lp, e.token);
    Token k = e.token;
    ++k.hop;
    if (s.rest) {
      q.push(Ev{e.t + s.delay, e.lp, 1, rest_seq[e.lp]++, 0, k});
    } else {
      q.push(Ev{e.t + s.delay, s.to, 0, e.lp, send_seq[e.lp]++, k});
    }
  }
  return traces;
}

}  // namespace spraynet::fabric::toy
