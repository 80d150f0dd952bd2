// The conservative kernel (fabric/kernel/) with a toy model and no DPDK node: logical processes
// pass tokens around a ring and across a mesh, each hop at least one lookahead later, sometimes
// resting at an LP first. Every LP's trace (what it served, when, in what order) must be the same
// on 1, 2, 3 and 8 threads, and the same as a plain sequential simulation computed here.
#include "fabric/kernel/conservative_kernel.h"

#include <catch2/catch.hpp>

#include <map>
#include <queue>
#include <tuple>
#include <vector>

using spraynet::fabric::ConservativeKernel;
using spraynet::fabric::kKernelNever;

namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser: the toy's "random" choices, reproducible
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
Step step_of(Shape shape, uint32_t lps, uint64_t lookahead, uint32_t at, const Token& k) {
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

constexpr uint64_t kLookahead = 10;
constexpr uint64_t kEnd = 2000;

Traces run_kernel(Shape shape, uint32_t lps, uint32_t tokens, uint32_t threads) {
  TokenModel model(shape, lps, kLookahead);
  ConservativeKernel<Token> kernel(lps, model);
  model.attach(&kernel);
  kernel.set_threads(threads);
  for (uint32_t i = 0; i < tokens; ++i) model.rest(i % lps, i % 3, Token{i, 0});
  for (;;) {
    const uint64_t t = kernel.earliest_here();
    if (t > kEnd) break;
    kernel.run_round(std::min(kEnd + 1, t + kLookahead));
  }
  kernel.clear_mail([](Token&) {});
  return model.traces();
}

// The same toy on one global event list, in the kernel's order: time, then at one LP and time
// its mail (by source LP and the source's own sequence) before its resting tokens (by rest
// order). Written without the kernel, as the reference.
Traces run_sequential(Shape shape, uint32_t lps, uint32_t tokens) {
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

size_t total(const Traces& t) {
  size_t n = 0;
  for (const auto& lp : t) n += lp.size();
  return n;
}

}  // namespace

TEST_CASE("kernel: tokens around a ring give the same trace on any thread count") {
  const Traces ref = run_sequential(Shape::kRing, 5, 12);
  REQUIRE(total(ref) > 1000);
  for (const uint32_t threads : {1u, 2u, 3u, 8u}) {
    INFO("threads " << threads);
    CHECK(run_kernel(Shape::kRing, 5, 12, threads) == ref);
  }
}

TEST_CASE("kernel: tokens across a mesh (messages to itself too) give the same trace") {
  const Traces ref = run_sequential(Shape::kMesh, 7, 40);
  REQUIRE(total(ref) > 5000);
  // Some messages arrive together at one LP and time: the merge order decides their order.
  size_t together = 0;
  for (const auto& lp : ref) {
    for (size_t i = 1; i < lp.size(); ++i)
      together += lp[i].from_mail && lp[i - 1].from_mail && lp[i].t == lp[i - 1].t;
  }
  CHECK(together > 0);
  for (const uint32_t threads : {1u, 2u, 3u, 8u}) {
    INFO("threads " << threads);
    CHECK(run_kernel(Shape::kMesh, 7, 40, threads) == ref);
  }
}

TEST_CASE("kernel: mail not yet delivered can be dropped and is released at the end") {
  TokenModel model(Shape::kRing, 3, kLookahead);
  ConservativeKernel<Token> kernel(3, model);
  model.attach(&kernel);
  for (uint32_t i = 0; i < 6; ++i) model.rest(i % 3, 0, Token{i, 0});
  // One round to t = 5: tokens that moved on are in the mailboxes, due at 10 or later.
  (void)kernel.earliest_here();
  kernel.run_round(5);
  size_t in_flight = 0;
  kernel.erase_mail_if([&](uint64_t t, Token&) {
    CHECK(t >= 10);
    ++in_flight;
    return false;
  });
  size_t dropped = 0;
  kernel.erase_mail_if([&](uint64_t, Token& k) {
    const bool drop = k.id % 2 == 0;
    dropped += drop;
    return drop;
  });
  size_t released = 0;
  kernel.clear_mail([&](Token&) { ++released; });
  CHECK(in_flight > 0);
  CHECK(released + dropped == in_flight);
  size_t after = 0;
  kernel.erase_mail_if([&](uint64_t, Token&) {
    ++after;
    return false;
  });
  CHECK(after == 0);
}
