#include "runtime/scheduler_thread.h"

#include <cstdio>
#include <utility>

#include "ditto/error.h"
#include "runtime/pipeline.h"

namespace ditto {

SchedulerThread::SchedulerThread(BatchEngine& engine, SchedulerOptions options)
    : engine_(engine),
      scheduler_(
          engine, options,
          [this](size_t number, const SampledToken& token) {
            const Entry& entry = entries_.at(number);
            return !entry.on_token || entry.on_token(token);
          },
          [this](size_t number, Generation generation) {
            // The request is out of the scheduler and its blocks are back: say so before its
            // owner hears of its end, so that the status an owner reads after it is current.
            publish_status();
            auto node = entries_.extract(number);
            numbers_.erase(node.mapped().ticket);
            if (node.mapped().on_finish) node.mapped().on_finish(std::move(generation));
          }),
      thread_([this] { loop(); }) {
  status_.kv = engine_.kv_stats();
}

SchedulerThread::~SchedulerThread() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

SchedulerThread::Ticket SchedulerThread::submit(GenerationRequest request, TokenCallback on_token,
                                                FinishCallback on_finish) {
  request = check(std::move(request));
  Ticket ticket;
  {
    std::lock_guard lock(mutex_);
    ticket = next_ticket_++;
    incoming_.push_back({ticket, std::move(request), std::move(on_token), std::move(on_finish)});
  }
  wake_.notify_all();
  return ticket;
}

void SchedulerThread::cancel(Ticket ticket) {
  {
    std::lock_guard lock(mutex_);
    cancels_.push_back(ticket);
  }
  wake_.notify_all();
}

void SchedulerThread::cancel_all() {
  {
    std::lock_guard lock(mutex_);
    cancel_all_ = true;
  }
  wake_.notify_all();
}

SchedulerThread::Status SchedulerThread::status() const {
  std::lock_guard lock(mutex_);
  Status status = status_;
  status.waiting += incoming_.size();
  return status;
}

bool SchedulerThread::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return idle_.wait_for(lock, timeout, [&] { return incoming_.empty() && status_.waiting + status_.running == 0; });
}

void SchedulerThread::start(Pending pending) {
  try {
    const size_t number = scheduler_.submit(std::move(pending.request));
    entries_.emplace(number, Entry{pending.ticket, std::move(pending.on_token), std::move(pending.on_finish)});
    numbers_.emplace(pending.ticket, number);
  } catch (const Error&) {  // checked by submit() already; the pool cannot have shrunk
    Generation refused;
    refused.stop = StopReason::Cancelled;
    if (pending.on_finish) pending.on_finish(std::move(refused));
  }
}

void SchedulerThread::cancel_everything() {
  std::vector<size_t> numbers;
  for (const auto& [number, entry] : entries_) numbers.push_back(number);
  for (const size_t number : numbers) scheduler_.cancel(number);
}

void SchedulerThread::heartbeat() {
  Pipeline* pipeline = engine_.options().pipeline;
  if (!pipeline || pipeline->failed()) return;
  try {
    pipeline->heartbeat();
  } catch (const PipelineError&) {  // the pipeline keeps the failure, which its owner acts on
  }
}

void SchedulerThread::publish_status() {
  {
    std::lock_guard lock(mutex_);
    status_ = {scheduler_.waiting(), scheduler_.running(), engine_.kv_stats()};
  }
  idle_.notify_all();
}

void SchedulerThread::loop() {
  for (;;) {
    std::deque<Pending> arrived;
    std::vector<Ticket> cancels;
    bool all = false, stopping = false;
    {
      std::unique_lock lock(mutex_);
      const bool woken = wake_.wait_for(lock, kHeartbeatEvery, [&] {
        return stopping_ || cancel_all_ || !incoming_.empty() || !cancels_.empty() || !scheduler_.idle();
      });
      if (!woken) {
        lock.unlock();
        heartbeat();
        continue;
      }
      arrived.swap(incoming_);
      status_.waiting += arrived.size();  // counted as waiting until the next status
      cancels.swap(cancels_);
      all = std::exchange(cancel_all_, false) || stopping_;
      stopping = stopping_;
    }
    for (Pending& pending : arrived) start(std::move(pending));
    if (all) {
      cancel_everything();
    } else {
      for (const Ticket ticket : cancels)
        if (const auto found = numbers_.find(ticket); found != numbers_.end()) scheduler_.cancel(found->second);
    }
    if (stopping) break;
    try {
      scheduler_.step();
    } catch (const std::exception& e) {  // a failed pass changes nothing in the engine; end every request
      std::fprintf(stderr, "error: a forward pass failed, cancelling every request: %s\n", e.what());
      cancel_everything();
    }
    publish_status();
  }
  std::deque<Pending> late;  // queued while stopping
  {
    std::lock_guard lock(mutex_);
    late.swap(incoming_);
  }
  for (Pending& pending : late) {
    Generation cancelled;
    cancelled.stop = StopReason::Cancelled;
    if (pending.on_finish) pending.on_finish(std::move(cancelled));
  }
  publish_status();
}

}  // namespace ditto
