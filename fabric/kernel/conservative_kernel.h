// A conservative parallel discrete-event kernel: logical processes (LPs) that exchange
// timestamped messages, run in rounds on any number of threads and MPI ranks with the same
// result. It knows nothing of what an LP holds (switches, NICs, packets): the model behind
// ConservativeKernel::Model serves an LP's own events, takes the messages due to it, and says
// at the end of a round what left it on its cut links; a message's Body is the model's.
//
// Rounds. The driver asks earliest() for T, the earliest event or message anywhere, and runs
// run_round(E) with E at most T + lookahead (the least delay of a cut link: nothing sent in a
// round can arrive before E). In a round every LP with something before E, or with mail, runs:
// it merges its mail (a heap by (t, order)), then serves whichever is first, its own event or
// its mail (mail first on a tie), until E; then the model's end_round() sends what left. LPs
// run on the RoundPool's threads, heaviest (by last round's work) first.
//
// Mailboxes. A message sent in round r goes into the sender's box for its target, parity r & 1,
// and the target is told (under a lock, once per round and sender). In round r + 1 the target
// takes the boxes of parity r & 1 while every sender writes parity (r + 1) & 1. Messages carry
// order = source LP << 40 | the source's sequence number, so the merge is in a fixed order
// however the threads ran: the run is the same on 1 thread or 8. Between ranks (set_ranks),
// exchange() sends the boxes whose target another rank runs, with the model's pack()/unpack().
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "fabric/kernel/rank_bytes.h"
#include "fabric/kernel/rank_link.h"
#include "fabric/kernel/round_pool.h"

namespace spraynet::fabric {

inline constexpr uint64_t kKernelNever = UINT64_MAX;

template <class Body>
class ConservativeKernel {
 public:
  struct Message {
    uint64_t t = 0;      // when it is due at its target
    uint64_t order = 0;  // source LP << 40 | the source's sequence number (set by send())
    Body body{};
  };

  class Model {
   public:
    virtual ~Model() = default;
    // The LP's earliest own event (not its mail); kKernelNever when it has none.
    virtual uint64_t next_event(uint32_t lp) = 0;
    // Serves that event; now(lp) is its time.
    virtual void serve_next(uint32_t lp) = 0;
    // Takes the LP's mail due at now(lp) (mail_front() / pop_mail(): at least the first).
    virtual void deliver_due(uint32_t lp) = 0;
    // The end of the LP's round: send() what left it.
    virtual void end_round(uint32_t lp) = 0;
    // Between ranks: a body in bytes and back (unpack may allocate: see set_between_rounds).
    virtual void pack(ByteWriter& /*w*/, const Body& /*b*/) {}
    virtual Body unpack(ByteReader& /*r*/) { return Body{}; }
    // A message dropped unread (for one another rank should not have sent): free what it holds.
    virtual void discard(Body& /*b*/) {}
  };

  ConservativeKernel(uint32_t lps, Model& model) : model_(model) {
    for (uint32_t i = 0; i < lps; ++i) {
      lps_.push_back(std::make_unique<Lp>());
      lps_.back()->index = i;
      for (auto& o : lps_.back()->out) o.resize(lps);
    }
    lp_next_t_.assign(lps, kKernelNever);
  }
  ConservativeKernel(const ConservativeKernel&) = delete;
  ConservativeKernel& operator=(const ConservativeKernel&) = delete;

  uint32_t lp_count() const { return static_cast<uint32_t>(lps_.size()); }

  // Threads that run the LPs (more than the LPs would only wait). Before the first round.
  void set_threads(uint32_t n) {
    pool_ = std::make_unique<RoundPool>(std::min<uint32_t>(n == 0 ? 1 : n, lp_count()));
  }
  // The LPs dealt round-robin over the ranks of `link` (null: this process runs them all).
  void set_ranks(RankLink* link) {
    ranks_ = link;
    lp_rank_.clear();
    if (link == nullptr) return;
    rank_ = link->rank();
    lp_rank_.resize(lps_.size());
    for (uint32_t i = 0; i < lps_.size(); ++i) lp_rank_[i] = i % link->size();
  }
  // Called between rounds, when no thread touches the model (a driver grows its pools there),
  // and before messages from other ranks are unpacked.
  void set_between_rounds(std::function<void()> hook) { between_rounds_ = std::move(hook); }
  void between_rounds() {
    if (between_rounds_) between_rounds_();
  }

  bool distributed() const { return ranks_ != nullptr && ranks_->size() > 1; }
  RankLink* ranks() const { return ranks_; }
  uint32_t rank() const { return rank_; }
  bool mine(uint32_t lp) const { return lp_rank_.empty() || lp_rank_[lp] == rank_; }

  // The LP's clock: the time of what it serves now; between rounds, the latest it reached.
  uint64_t now(uint32_t lp) const { return lps_[lp]->now; }
  void advance(uint32_t lp, uint64_t t) { lps_[lp]->now = std::max(lps_[lp]->now, t); }
  uint64_t rounds() const { return round_; }

  // Sends `body` from LP `from` to LP `to`, due at t (no earlier than the end of this round):
  // in a round, into this round's boxes; in flush_at(), into those the next round takes.
  void send(uint32_t from, uint32_t to, uint64_t t, const Body& body) {
    const uint32_t parity = flushing_ ? pull_parity() : push_parity();
    Lp& src = *lps_[from];
    std::vector<Message>& box = src.out[parity][to];
    // Another rank's LP gets it through exchange(), not through its senders list.
    if (box.empty() && mine(to)) {
      Lp& target = *lps_[to];
      const std::lock_guard<std::mutex> lock(target.senders_mutex);
      target.senders[parity].push_back(from);
    }
    box.push_back(Message{t, static_cast<uint64_t>(from) << 40 | src.seq++, body});
    src.out_min_t = std::min(src.out_min_t, t);
  }

  // The LP's merged mail: the earliest first.
  bool mail_empty(uint32_t lp) const { return lps_[lp]->mail.empty(); }
  const Message& mail_front(uint32_t lp) const { return lps_[lp]->mail.front(); }
  Message pop_mail(uint32_t lp) {
    std::vector<Message>& mail = lps_[lp]->mail;
    std::pop_heap(mail.begin(), mail.end(), Later{});
    Message m = mail.back();
    mail.pop_back();
    return m;
  }

  // The earliest thing due at one of this rank's LPs: its own event or its mail, with the mail
  // sent but not yet taken. Call between rounds; reduce over the ranks is the caller's (it
  // reduces its own figures in the same call).
  uint64_t earliest_here() {
    uint64_t t = mail_min_t_;
    for (auto& lp : lps_) {
      if (!mine(lp->index)) continue;
      lp_next_t_[lp->index] = next_time(*lp);
      t = std::min(t, lp_next_t_[lp->index]);
    }
    return t;
  }

  // One round: every LP of this rank with an event before end_ns or with mail runs to end_ns;
  // then the messages for other ranks cross. earliest_here() must have been called since the
  // last round.
  void run_round(uint64_t end_ns) {
    if (!pool_) set_threads(1);
    const uint32_t pull = pull_parity();
    const uint32_t push = push_parity();
    active_.clear();
    for (auto& lp : lps_) {
      if (!mine(lp->index)) continue;
      if (lp_next_t_[lp->index] < end_ns || !lp->senders[pull].empty() ||
          !lp->remote_in[pull].empty()) {
        active_.push_back(lp->index);
      }
    }
    std::stable_sort(active_.begin(), active_.end(),
                     [&](uint32_t a, uint32_t b) { return lps_[a]->work > lps_[b]->work; });
    const std::function<void(uint32_t)> run_one = [&](uint32_t i) {
      run_lp(*lps_[i], end_ns, pull);
    };
    pool_->run(active_, run_one);
    // Only the LPs that ran sent anything; the others' out_min_t is from an earlier round whose
    // mail has been taken.
    mail_min_t_ = kKernelNever;
    for (const uint32_t i : active_) mail_min_t_ = std::min(mail_min_t_, lps_[i]->out_min_t);
    exchange(push);
    ++round_;
    between_rounds();
  }

  // Between rounds, at fabric-wide time t (an event that changed what leaves the LPs): every
  // LP of this rank at t at least, its end_round() run again, what it sends taken next round.
  void flush_at(uint64_t t) {
    flushing_ = true;
    for (auto& lp : lps_) {
      if (!mine(lp->index)) continue;
      advance(lp->index, t);
      lp->out_min_t = kKernelNever;
      model_.end_round(lp->index);
      mail_min_t_ = std::min(mail_min_t_, lp->out_min_t);
    }
    flushing_ = false;
    exchange(pull_parity());
  }

  // The latest time any LP of this rank reached.
  uint64_t latest_here() const {
    uint64_t t = 0;
    for (const auto& lp : lps_) {
      if (mine(lp->index)) t = std::max(t, lp->now);
    }
    return t;
  }

  // Every message not yet delivered, anywhere (mail, boxes, from other ranks): `drop(body)`
  // true removes it (the caller freeing what it holds).
  template <class Drop>
  void erase_mail_if(Drop drop) {
    const auto dies = [&](Message& m) { return drop(m.t, m.body); };
    for (auto& lp : lps_) {
      const size_t before = lp->mail.size();
      std::erase_if(lp->mail, dies);
      if (lp->mail.size() != before) std::make_heap(lp->mail.begin(), lp->mail.end(), Later{});
      for (auto& parity : lp->out) {
        for (auto& box : parity) std::erase_if(box, dies);
      }
      for (auto& box : lp->remote_in) std::erase_if(box, dies);
    }
    // A mailbox left empty keeps its sender listed: its target takes nothing from it.
  }
  // Every message not delivered, each passed to `release` and forgotten (at the end of a run).
  template <class Release>
  void clear_mail(Release release) {
    erase_mail_if([&](uint64_t, Body& b) {
      release(b);
      return true;
    });
    for (auto& lp : lps_) {
      for (auto& s : lp->senders) s.clear();
    }
  }

 private:
  // For std::push_heap: the earliest (t, order) on top.
  struct Later {
    bool operator()(const Message& a, const Message& b) const {
      return a.t != b.t ? a.t > b.t : a.order > b.order;
    }
  };
  struct Lp {
    uint32_t index = 0;
    std::vector<Message> mail;  // merged mailbox: a heap by Later
    uint64_t now = 0;
    uint64_t seq = 0;  // messages sent
    // Messages sent, by round parity and target LP; senders: who wrote to this LP, by parity
    // (under the mutex).
    std::array<std::vector<std::vector<Message>>, 2> out;
    std::array<std::vector<uint32_t>, 2> senders;
    std::mutex senders_mutex;
    std::array<std::vector<Message>, 2> remote_in;  // by parity: from LPs on other ranks
    uint64_t out_min_t = kKernelNever;              // the earliest message sent in its last round
    uint64_t work = 0;  // events of its last round: who is claimed first
  };

  // The boxes a round's LPs write (r & 1), and those it takes (the last round's).
  uint32_t push_parity() const { return static_cast<uint32_t>(round_ & 1); }
  uint32_t pull_parity() const { return static_cast<uint32_t>((round_ + 1) & 1); }

  uint64_t next_time(Lp& lp) {
    const uint64_t t_node = model_.next_event(lp.index);
    const uint64_t t_mail = lp.mail.empty() ? kKernelNever : lp.mail.front().t;
    return std::min(t_node, t_mail);
  }

  void run_lp(Lp& lp, uint64_t end_ns, uint32_t pull) {
    for (const Message& m : lp.remote_in[pull]) {
      lp.mail.push_back(m);
      std::push_heap(lp.mail.begin(), lp.mail.end(), Later{});
    }
    lp.remote_in[pull].clear();
    for (const uint32_t from : lp.senders[pull]) {
      std::vector<Message>& box = lps_[from]->out[pull][lp.index];
      for (const Message& m : box) {
        lp.mail.push_back(m);
        std::push_heap(lp.mail.begin(), lp.mail.end(), Later{});
      }
      box.clear();
    }
    lp.senders[pull].clear();
    lp.out_min_t = kKernelNever;
    uint64_t work = 0;
    for (;;) {
      const uint64_t t_mail = lp.mail.empty() ? kKernelNever : lp.mail.front().t;
      const uint64_t t_node = model_.next_event(lp.index);
      const uint64_t t = std::min(t_mail, t_node);
      if (t >= end_ns) break;
      lp.now = t;
      ++work;
      if (t_mail <= t_node) {
        model_.deliver_due(lp.index);
      } else {
        model_.serve_next(lp.index);
      }
    }
    model_.end_round(lp.index);
    lp.work = work;
  }

  void exchange(uint32_t parity) {
    if (!distributed()) return;
    std::vector<ByteWriter> to(ranks_->size());
    for (auto& lp : lps_) {
      if (!mine(lp->index)) continue;
      for (uint32_t target = 0; target < lps_.size(); ++target) {
        std::vector<Message>& box = lp->out[parity][target];
        if (mine(target) || box.empty()) continue;
        ByteWriter& w = to[lp_rank_[target]];
        for (const Message& m : box) {
          w.put(target);
          w.put(m.t);
          w.put(m.order);
          model_.pack(w, m.body);
        }
        box.clear();
      }
    }
    std::vector<std::string> out;
    for (ByteWriter& w : to) out.push_back(std::move(w.str()));
    const std::vector<std::string> in = ranks_->exchange(out);
    // What comes in may take from this rank's pools: let them grow first.
    between_rounds();
    for (const std::string& bytes : in) {
      ByteReader r(bytes);
      while (!r.done()) {
        const auto target = r.get<uint32_t>();
        Message m;
        m.t = r.get<uint64_t>();
        m.order = r.get<uint64_t>();
        m.body = model_.unpack(r);
        if (target >= lps_.size() || !mine(target)) {
          model_.discard(m.body);
          throw std::runtime_error("a message for a logical process this rank does not run");
        }
        lps_[target]->remote_in[parity].push_back(m);
      }
    }
  }

  Model& model_;
  std::vector<std::unique_ptr<Lp>> lps_;
  std::unique_ptr<RoundPool> pool_;
  RankLink* ranks_ = nullptr;
  uint32_t rank_ = 0;
  std::vector<uint32_t> lp_rank_;  // per LP (empty: every LP is this process's)
  std::function<void()> between_rounds_;
  uint64_t round_ = 0;
  bool flushing_ = false;  // in flush_at(): what is sent goes to the next round's boxes
  uint64_t mail_min_t_ = kKernelNever;  // the earliest message not yet taken by its LP
  std::vector<uint32_t> active_;        // the LPs of a round, heaviest first
  std::vector<uint64_t> lp_next_t_;     // per LP: next_time() as the round is planned
};

}  // namespace spraynet::fabric
