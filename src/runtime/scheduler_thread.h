#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ditto/batch.h"
#include "runtime/scheduler.h"

namespace ditto {

// A Scheduler driven by a thread of its own, for requests that arrive from other threads (a
// server's): they are queued, cancelled and watched from any thread, while one thread steps the
// scheduler, sleeping when there is nothing to do. What a request gets is what the Scheduler
// gives it: it does not depend on when it arrived or what else runs.
class SchedulerThread {
 public:
  // Per request, both called on the scheduler's thread: they must not block for long, and must
  // not throw. Returning false from the token callback ends the request there (a stop string).
  using TokenCallback = std::function<bool(const SampledToken& token)>;
  using FinishCallback = std::function<void(Generation generation)>;
  using Ticket = uint64_t;

  struct Status {
    size_t waiting = 0, running = 0;  // requests queued, and started
    KVStats kv;
  };

  SchedulerThread(BatchEngine& engine, SchedulerOptions options);
  // Cancels whatever is left and joins the thread.
  ~SchedulerThread();
  SchedulerThread(const SchedulerThread&) = delete;
  SchedulerThread& operator=(const SchedulerThread&) = delete;

  // Checks the request (Scheduler::check: throws ditto::Error) and queues it for the next step.
  // Any thread, the scheduler's own included (from a callback).
  Ticket submit(GenerationRequest request, TokenCallback on_token, FinishCallback on_finish);
  // The request as submit() would queue it (seed drawn, limits checked); throws ditto::Error.
  GenerationRequest check(GenerationRequest request) const { return scheduler_.check(std::move(request)); }
  // Ends a request before the next step; its finish callback gets what it generated, with
  // StopReason::Cancelled. A finished or unknown ticket is ignored. Any thread.
  void cancel(Ticket ticket);
  void cancel_all();
  // The counts and the KV pool as of the last step (requests queued since count as waiting).
  Status status() const;
  // Waits until nothing is queued or running, at most `timeout`; true if idle.
  bool wait_idle(std::chrono::milliseconds timeout);

 private:
  // Idle for this long through pipeline stages, the thread checks that they answer
  // (Pipeline::heartbeat); a stage gone silent fails the pipeline, which the server acts on.
  static constexpr std::chrono::seconds kHeartbeatEvery{1};
  void heartbeat();

  struct Pending {
    Ticket ticket;
    GenerationRequest request;
    TokenCallback on_token;
    FinishCallback on_finish;
  };
  struct Entry {
    Ticket ticket;
    TokenCallback on_token;
    FinishCallback on_finish;
  };
  void loop();
  void start(Pending pending);
  void cancel_everything();
  void publish_status();

  BatchEngine& engine_;
  Scheduler scheduler_;
  // The scheduler's thread only: its requests by scheduler number, and their numbers by ticket.
  std::unordered_map<size_t, Entry> entries_;
  std::unordered_map<Ticket, size_t> numbers_;

  mutable std::mutex mutex_;  // guards what follows
  std::condition_variable wake_, idle_;
  std::deque<Pending> incoming_;
  std::vector<Ticket> cancels_;
  bool cancel_all_ = false, stopping_ = false;
  Ticket next_ticket_ = 1;
  Status status_;

  std::thread thread_;  // last: starts once the rest is built
};

}  // namespace ditto
