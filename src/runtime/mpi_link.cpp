// The pipeline's messages over MPI (OpenMPI). Errors are returned, not fatal (MPI_ERRORS_RETURN),
// and become PipelineErrors; every wait polls its requests, so that it can give up after the
// timeout or when stopped, and sleeps between polls, so that a waiting stage leaves its core to
// the stages that compute.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <deque>
#include <thread>

#include "runtime/pipeline.h"

namespace ditto {

namespace {

using Clock = std::chrono::steady_clock;

class MpiLink final : public PipelineLink {
 public:
  explicit MpiLink(double timeout_seconds) : timeout_(timeout_seconds) {
    int provided = 0;
    // Serialized: a server's engine runs on its scheduler thread, after MPI starts on the main one.
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "starting MPI");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (provided < MPI_THREAD_SERIALIZED) throw PipelineError("this MPI library cannot be called from more than one thread");
    int rank = 0, size = 0;
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
    rank_ = size_t(rank), size_ = size_t(size);
  }

  size_t rank() const override { return rank_; }
  size_t size() const override { return size_; }

  void send(size_t to, int tag, std::vector<uint64_t> words) override {
    Send& s = sends_.emplace_back();
    s.words = std::move(words);
    start_send(s, to, tag, s.words.data(), s.words.size(), MPI_UINT64_T);
  }

  void send(size_t to, int tag, std::vector<float> floats) override {
    Send& s = sends_.emplace_back();
    s.floats = std::move(floats);
    start_send(s, to, tag, s.floats.data(), s.floats.size(), MPI_FLOAT);
  }

  void receive(size_t from, int tag, float* into, size_t floats) override {
    MPI_Request& request = receives_.emplace_back();
    check(MPI_Irecv(into, count(floats), MPI_FLOAT, int(from), tag, MPI_COMM_WORLD, &request),
          "receiving from stage " + std::to_string(from));
  }

  std::vector<uint64_t> receive_words(size_t from, int tag, bool idle, const std::string& what) override {
    MPI_Status status;
    wait(what, idle, [&] {
      int found = 0;
      check(MPI_Iprobe(int(from), tag, MPI_COMM_WORLD, &found, &status), "waiting for " + what);
      return found != 0;
    });
    int words = 0;
    check(MPI_Get_count(&status, MPI_UINT64_T, &words), "receiving " + what);
    std::vector<uint64_t> message(static_cast<size_t>(words));
    check(MPI_Recv(message.data(), words, MPI_UINT64_T, int(from), tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
          "receiving " + what);
    return message;
  }

  void wait_receives(size_t count, const std::string& what) override {
    for (; count > 0; --count) {
      if (receives_.empty()) throw PipelineError(prefix() + "waiting for " + what + " that was never asked for");
      wait(what, false, [&] {
        int done = 0;
        check(MPI_Test(&receives_.front(), &done, MPI_STATUS_IGNORE), "receiving " + what);
        return done != 0;
      });
      receives_.pop_front();
    }
  }

  void wait_sends(const std::string& what) override {
    wait(what, false, [&] {
      reap();
      return sends_.empty();
    });
  }

  void stop() override { stopped_ = true; }

  void finalize() override { MPI_Finalize(); }

 private:
  struct Send {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<uint64_t> words;
    std::vector<float> floats;
    size_t to = 0;
  };

  void check(int code, const std::string& what) const {
    if (code == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    throw PipelineError(prefix() + what + ": MPI: " + std::string(text, size_t(length)));
  }

  std::string prefix() const { return "stage " + std::to_string(rank_) + " of " + std::to_string(size_) + ": "; }

  static int count(size_t n) {
    if (n > size_t(INT_MAX)) throw PipelineError("a message of " + std::to_string(n) + " values is too long for MPI");
    return int(n);
  }

  // Drops the sends that are complete, oldest first.
  // Starts sending the buffer that `s` holds (it stays alive until the send completes).
  void start_send(Send& s, size_t to, int tag, const void* data, size_t n, MPI_Datatype type) {
    s.to = to;
    check(MPI_Isend(data, count(n), type, int(to), tag, MPI_COMM_WORLD, &s.request),
          "sending to stage " + std::to_string(to));
    reap();
  }

  void reap() {
    while (!sends_.empty()) {
      int done = 0;
      check(MPI_Test(&sends_.front().request, &done, MPI_STATUS_IGNORE), "sending to stage " + std::to_string(sends_.front().to));
      if (!done) return;
      sends_.pop_front();
    }
  }

  // Polls until `done`, sleeping a little longer each time (up to 200 us in a pass, 2 ms while
  // idle). Throws once stopped, or after the timeout unless idle.
  template <class Done>
  void wait(const std::string& what, bool idle, Done done) {
    const auto start = Clock::now();
    auto sleep = std::chrono::microseconds(0);
    const auto longest = std::chrono::microseconds(idle ? 2000 : 200);
    while (!done()) {
      if (stopped_) throw PipelineError(prefix() + "stopped while waiting for " + what);
      if (!idle && Clock::now() - start > std::chrono::duration<double>(timeout_))
        throw PipelineError(prefix() + "waited " + std::to_string(int(timeout_)) + " s for " + what +
                            " (--stage-timeout): a stage has stopped, or the link to it is down");
      if (sleep.count()) std::this_thread::sleep_for(sleep);
      sleep = std::min(longest, sleep + std::chrono::microseconds(10));
    }
  }

  double timeout_;
  size_t rank_ = 0, size_ = 1;
  std::deque<Send> sends_;
  std::deque<MPI_Request> receives_;  // oldest first
  std::atomic<bool> stopped_{false};
};

}  // namespace

std::unique_ptr<PipelineLink> open_mpi_link(double timeout_seconds) { return std::make_unique<MpiLink>(timeout_seconds); }

}  // namespace ditto
