// Worker threads assembling an epoch's batches in order; see pipeline.h.
#include "loader/pipeline.h"

#include <pthread.h>

#include <exception>
#include <string>

namespace stallscope::loader {
namespace {

using Clock = std::chrono::steady_clock;

int64_t ns_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
}

const char kStopped[] = "stopped";  // assemble() gave up because stop() was called

}  // namespace

Pipeline::Pipeline(std::shared_ptr<const Source> source, std::shared_ptr<BufferPool> pool,
                   std::shared_ptr<const EpochPlan> plan, const PipelineOptions& options)
    : source_(std::move(source)), pool_(std::move(pool)), plan_(std::move(plan)), o_(options) {
  for (const Field& f : source_->fields()) field_bytes_.push_back(f.bytes());
  claim_ = handed_ = plan_->first_batch;
  end_ = plan_->num_batches;
  ready_.resize(static_cast<size_t>(o_.prefetch));
}

Result<std::unique_ptr<Pipeline>> Pipeline::start(std::shared_ptr<const Source> source,
                                                  std::shared_ptr<BufferPool> pool,
                                                  std::shared_ptr<const EpochPlan> plan,
                                                  const PipelineOptions& options) {
  if (options.threads < 1 || options.prefetch < 1) return Status::Error("threads and prefetch must be at least 1");
  std::unique_ptr<Pipeline> p(new Pipeline(std::move(source), std::move(pool), std::move(plan), options));
  try {
    for (int w = 0; w < options.threads; ++w) p->threads_.emplace_back(&Pipeline::work, p.get(), w);
  } catch (const std::exception& e) {
    p->stop();  // joins the threads that did start
    return Status::Error(std::string("cannot start a loader thread: ") + e.what());
  }
  return p;
}

Pipeline::~Pipeline() { stop(); }

void Pipeline::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    stopping_.store(true, std::memory_order_relaxed);
  }
  work_cv_.notify_all();
  consumer_cv_.notify_all();
  std::lock_guard<std::mutex> join(join_mu_);
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  // Batches assembled but never taken: their slots go back to the pool now.
  std::lock_guard<std::mutex> lock(mu_);
  for (Batch& b : ready_) b = Batch();
}

Pipeline::Next Pipeline::next(std::optional<std::chrono::milliseconds> timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const size_t ring = ready_.size();
  auto can_go = [&] {
    return stop_ || done_ || handed_ >= end_ || ready_[static_cast<size_t>(handed_) % ring].index == handed_ ||
           error_batch_ == handed_;
  };
  if (timeout) {
    if (!consumer_cv_.wait_for(lock, *timeout, can_go)) return Next{Got::kTimeout, {}, {}};
  } else {
    consumer_cv_.wait(lock, can_go);
  }
  if (stop_ || done_ || handed_ >= end_) {
    done_ = true;
    return Next{};
  }
  Batch& slot = ready_[static_cast<size_t>(handed_) % ring];
  if (slot.index == handed_) {
    Next n{Got::kBatch, std::move(slot), {}};
    slot = Batch();
    ++handed_;
    lock.unlock();
    work_cv_.notify_one();  // one more batch may be claimed
    return n;
  }
  Next n{Got::kError, {}, error_};
  done_ = true;
  lock.unlock();
  stop();
  return n;
}

void Pipeline::work(int worker) {
  const std::string name = "ss-loader-" + std::to_string(worker);
  pthread_setname_np(pthread_self(), name.c_str());  // 15 characters at most: fits
  if (o_.events != nullptr) o_.events->thread_name(name);
  std::vector<std::byte*> dst(field_bytes_.size());
  for (;;) {
    int64_t b = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || failed_ || claim_ >= end_ || claim_ < handed_ + o_.prefetch; });
      if (stop_ || failed_ || claim_ >= end_) break;
      b = claim_++;
    }
    Batch batch;
    Status s = assemble(worker, b, &batch, &dst);
    std::unique_lock<std::mutex> lock(mu_);
    if (!s.ok()) {
      if (s.message() == kStopped) break;
      failed_ = true;
      if (b < error_batch_) {
        error_batch_ = b;
        error_ = std::move(s);
      }
      lock.unlock();
      work_cv_.notify_all();
      consumer_cv_.notify_all();
      break;
    }
    ready_[static_cast<size_t>(b) % ready_.size()] = std::move(batch);
    lock.unlock();
    consumer_cv_.notify_all();
  }
}

Status Pipeline::sample_error(int64_t b, int64_t index, const Status& s) const {
  // Sources name the file and the sample in their messages (source.h); the pipeline adds the
  // index in any case, and the source's description of the sample when the message lacks it.
  std::string where;
  try {
    where = source_->describe(index);
  } catch (...) {
    where.clear();
  }
  std::string m = "sample " + std::to_string(index);
  if (!where.empty() && s.message().find(where) == std::string::npos) m += " (" + where + ")";
  m += " in batch " + std::to_string(b) + " of epoch " + std::to_string(plan_->epoch) + ": " + s.message();
  for (char& c : m) {
    if (c == '\n') c = ' ';
  }
  return Status::Error(m);
}

Status Pipeline::assemble(int worker, int64_t b, Batch* out, std::vector<std::byte*>* dst) {
  const Events* ev = o_.events;
  const int64_t L = o_.loader_id;
  if (ev != nullptr) ev->sent(L, b, worker);
  const bool span = ev != nullptr && ev->fetch_begin(L, b, worker);
  const Clock::time_point t0 = Clock::now();
  const std::span<const int64_t> indices = plan_->batch(b);
  Status status;
  SlotRef slot;
  status = pool_->acquire(&slot);
  StageTimes sum;
  for (size_t j = 0; status.ok() && j < indices.size(); ++j) {
    if (stopping_.load(std::memory_order_relaxed)) {
      status = Status::Error(kStopped);
      break;
    }
    const int64_t index = indices[j];
    for (size_t f = 0; f < dst->size(); ++f) (*dst)[f] = slot->field(f) + j * field_bytes_[f];
    Rng rng(sample_seed(o_.seed, plan_->epoch, index));
    StageTimes t;
    Status s;
    try {
      s = source_->read(index, *dst, rng, &t);
    } catch (const std::exception& e) {
      s = Status::Error(std::string("the source threw: ") + e.what());
    } catch (...) {
      s = Status::Error("the source threw");
    }
    if (!s.ok()) {
      status = sample_error(b, index, s);
      break;
    }
    sum.read_ns += t.read_ns;
    sum.decode_ns += t.decode_ns;
    sum.augment_ns += t.augment_ns;
  }
  if (!status.ok() && status.message() != kStopped && !slot) {
    status = Status::Error("batch " + std::to_string(b) + " of epoch " + std::to_string(plan_->epoch) + ": " +
                           status.message());
  }
  if (span) {
    // A source that times only decoding and augmenting (or nothing: in-memory arrays) has the
    // rest of the batch's time counted as reading.
    if (sum.read_ns == 0) {
      const int64_t rest = ns_since(t0) - static_cast<int64_t>(sum.decode_ns + sum.augment_ns);
      sum.read_ns = static_cast<uint64_t>(std::max<int64_t>(rest, 0));
    }
    ev->stages(static_cast<int64_t>(sum.read_ns / 1000), static_cast<int64_t>(sum.decode_ns / 1000),
               static_cast<int64_t>(sum.augment_ns / 1000));
    if (status.ok()) ev->collate(L, b, static_cast<int64_t>(indices.size()));
    ev->fetch_end();
  }
  if (!status.ok()) return status;
  if (ev != nullptr) ev->put(L, b, worker);
  out->index = b;
  out->worker = worker;
  out->samples = static_cast<int64_t>(indices.size());
  out->slot = std::move(slot);
  return Status::Ok();
}

}  // namespace stallscope::loader
