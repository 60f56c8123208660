// Recording thread; see recorder.h.
#include "storage/recorder.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace stallscope {
namespace {
std::mutex g_exit_mu;  // guards Recorder::exits_ between the caller and the drain thread
}

Result<std::unique_ptr<Recorder>> Recorder::start(Arena* arena, const std::string& path,
                                                  const std::map<std::string, std::string>& meta, int interval_ms) {
  auto writer = Writer::create(path);
  if (!writer.ok()) return writer.status();
  std::unique_ptr<Recorder> r(new Recorder());
  r->arena_ = arena;
  r->path_ = path;
  r->interval_ms_ = interval_ms;
  r->writer_ = std::move(*writer);
  r->ingest_ = std::make_unique<Ingest>(arena, r->writer_.get());
  // --keep-detail: the launcher passes the window in meta keep_detail_ns.
  if (auto keep = meta.find("keep_detail_ns"); keep != meta.end()) {
    char* end = nullptr;
    const long long ns = std::strtoll(keep->second.c_str(), &end, 10);
    if (end != keep->second.c_str() && *end == '\0' && ns > 0) {
      if (Status s = r->writer_->set_keep_detail(ns); !s.ok())
        return Status::Error("cannot write " + path + ": " + s.message());
    }
  }
  if (Status s = r->ingest_->write_meta(meta); !s.ok())
    return Status::Error("cannot write " + path + ": " + s.message());
  if (::pipe2(r->wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) return Status::Error("cannot create a pipe");
  // The drain thread takes no process signals: they belong to the program being recorded.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  r->thread_ = std::thread([rec = r.get()] { rec->loop(); });
  r->sampler_ = std::thread([rec = r.get()] { rec->sample_loop(); });
  r->spiller_ = std::thread([rec = r.get()] { rec->spill_loop(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return r;
}

Recorder::~Recorder() {
  (void)stop();  // a failure was said on stderr when it happened (fail())
  if (wake_pipe_[0] >= 0) ::close(wake_pipe_[0]);
  if (wake_pipe_[1] >= 0) ::close(wake_pipe_[1]);
}

void Recorder::fail(const Status& s) {
  if (!failed_.exchange(true)) {
    std::fprintf(stderr, "stallscope: recording to %s stopped: %s; the program goes on unrecorded\n", path_.c_str(),
                 s.message().c_str());
  }
}

void Recorder::loop() {
  thread_tid_.store(static_cast<pid_t>(::syscall(SYS_gettid)));
  // A drain every interval, or sooner when a ring is a quarter full (looked at every 10 ms: a few
  // atomic loads): one thread handing tiny batches writes about 100,000-270,000 events a second,
  // and a ring of 16,384 events overflowed between two drains 100 ms apart. Looking every 5 ms
  // woke the launcher 200 times a second, each wake-up a core taken from the training.
  for (;;) {
    pollfd p{wake_pipe_[0], POLLIN, 0};
    for (int waited = 0; waited < interval_ms_; waited += kFillCheckMs) {
      if (::poll(&p, 1, std::min(kFillCheckMs, interval_ms_ - waited)) != 0) break;  // woken (or EINTR)
      if (!failed_.load() && ingest_->fullest_ring() >= 0.25) break;
    }
    char buf[64];
    while (::read(wake_pipe_[0], buf, sizeof buf) > 0) {
    }
    const bool last = stopping_.load();
    if (!failed_.load()) {
      {
        std::lock_guard<std::mutex> g(g_exit_mu);
        for (const auto& [pid, st] : exits_) ingest_->set_exit_status(pid, st.first, st.second);
        exits_.clear();
        ingest_->add_samples(std::move(samples_));
        samples_.clear();
      }
      {
        std::lock_guard<std::mutex> g(spill_mu_);
        draining_ = true;
      }
      spill_cv_.notify_one();
      Status s = ingest_->drain(last);
      {
        std::lock_guard<std::mutex> g(spill_mu_);
        draining_ = false;
      }
      if (!s.ok()) fail(s);
      if (last && !failed_.load()) {
        Status f = writer_->finish();
        if (!f.ok()) fail(f);
      }
      const IngestStats& st = ingest_->stats();
      spans_.store(st.spans);
      events_.store(st.events);
      dropped_.store(st.dropped);
    }
    if (last) break;
  }
  writer_.reset();  // closes the database
  finished_.store(true);
}

void Recorder::sample_loop() {
  ProcSampler sampler;
  while (!stopping_.load()) {
    const std::vector<int> pids = Ingest::live_pids(*arena_);
    std::vector<ProcSample> s = sampler.sample(pids, monotonic_ns());
    {
      std::lock_guard<std::mutex> g(g_exit_mu);
      samples_.insert(samples_.end(), s.begin(), s.end());
    }
    std::unique_lock<std::mutex> lk(sampler_mu_);
    sampler_cv_.wait_for(lk, std::chrono::milliseconds(kSampleIntervalMs), [this] { return stopping_.load(); });
  }
}

void Recorder::spill_loop() {
  std::unique_lock<std::mutex> lk(spill_mu_);
  for (;;) {
    spill_cv_.wait(lk, [this] { return draining_ || spill_stop_; });
    if (spill_stop_) return;
    // A drain has begun; most end within the first look. Not woken at the end: the look after it
    // finds draining_ false and goes back to sleep.
    while (draining_ && !spill_stop_) {
      spill_cv_.wait_for(lk, std::chrono::milliseconds(kFillCheckMs), [this] { return spill_stop_; });
      if (!draining_ || spill_stop_) break;
      lk.unlock();
      (void)ingest_->spill();
      lk.lock();
    }
  }
}

void Recorder::wake() {
  const char c = 1;
  if (wake_pipe_[1] >= 0) (void)!::write(wake_pipe_[1], &c, 1);
}

void Recorder::set_exit_status(int pid, std::optional<int> exit_code, std::optional<int> exit_signal) {
  std::lock_guard<std::mutex> g(g_exit_mu);
  exits_[pid] = {exit_code, exit_signal};
}

Status Recorder::stop() {
  if (stopped_.exchange(true)) return final_status_;
  {
    std::lock_guard<std::mutex> g(sampler_mu_);  // not between the sampler's look and its wait
    stopping_.store(true);
  }
  sampler_cv_.notify_all();
  if (sampler_.joinable()) sampler_.join();
  wake();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard<std::mutex> g(spill_mu_);
    spill_stop_ = true;
  }
  spill_cv_.notify_all();
  if (spiller_.joinable()) spiller_.join();
  final_status_ = failed_.load() ? Status::Error("recording failed") : Status::Ok();
  return final_status_;
}

bool Recorder::finish_from_signal(int timeout_ms) {
  stopping_.store(true);
  wake();
  for (int waited = 0; waited < timeout_ms && !finished_.load(); waited += 5) {
    timespec ts{0, 5 * 1000 * 1000};
    ::nanosleep(&ts, nullptr);
  }
  return finished_.load();
}

IngestStats Recorder::stats() const {
  IngestStats s;
  s.spans = spans_.load();
  s.events = events_.load();
  s.dropped = dropped_.load();
  return s;
}

}  // namespace stallscope
