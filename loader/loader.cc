// The reference loader's epochs over a Source; see loader.h.
#include "loader/loader.h"

#include <algorithm>
#include <utility>

#include "common/cpus.h"

namespace stallscope::loader {

int default_threads() { return std::max(1, cpus::budget().usable - 1); }

int default_prefetch(int threads) { return std::max(2, 2 * threads); }

Loader::Loader(std::shared_ptr<const Source> source, const LoaderOptions& o, Sampler sampler,
               std::shared_ptr<BufferPool> pool)
    : source_(std::move(source)), o_(o), pool_(std::move(pool)), sampler_(std::move(sampler)) {}

Result<std::unique_ptr<Loader>> Loader::create(std::shared_ptr<const Source> source, const LoaderOptions& options) {
  if (source == nullptr) return Status::Error("no source");
  LoaderOptions o = options;
  if (o.threads < 0) return Status::Error("threads must be at least 1, not " + std::to_string(o.threads));
  if (o.prefetch < 0) return Status::Error("prefetch must be at least 1, not " + std::to_string(o.prefetch));
  if (o.threads == 0) o.threads = default_threads();
  if (o.prefetch == 0) o.prefetch = default_prefetch(o.threads);
  SamplerOptions so;
  so.dataset_len = source->size();
  so.batch_size = o.batch_size;
  so.shuffle = o.shuffle;
  so.seed = o.seed;
  so.drop_last = o.drop_last;
  so.rank = o.rank;
  so.world_size = o.world_size;
  Result<Sampler> sampler = Sampler::create(so);
  if (!sampler.ok()) return sampler.status();
  PoolOptions po;
  for (const Field& f : source->fields()) po.field_bytes.push_back(f.bytes() * static_cast<size_t>(o.batch_size));
  // The batches in flight, plus the two a training loop holds while it asks for the next one
  // (the batch it works on, and the one it just replaced until Python drops it).
  po.slots = o.prefetch + 2;
  po.pin = o.pin_memory;
  Result<std::shared_ptr<BufferPool>> pool = BufferPool::create(po);
  if (!pool.ok()) return pool.status();
  return std::unique_ptr<Loader>(new Loader(std::move(source), o, std::move(sampler.value()), std::move(pool.value())));
}

Loader::~Loader() { stop(); }

bool Loader::bind_events(const std::string& library_path) {
  if (events_.bound()) return true;
  stop();  // binding writes what the threads read: none may run
  return events_.bind(library_path);
}

void Loader::set_loader_id(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  o_.loader_id = id;
}

int64_t Loader::batches_per_epoch() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sampler_.batches_per_epoch();
}

void Loader::set_epoch(int64_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  sampler_.set_epoch(epoch);
}

Result<Loader::EpochStart> Loader::begin_epoch() {
  stop();
  events_.intern();  // a session may have started or ended since the last epoch
  std::lock_guard<std::mutex> lock(mu_);
  auto plan = std::make_shared<EpochPlan>(sampler_.begin_epoch());
  PipelineOptions po;
  po.threads = o_.threads;
  po.prefetch = o_.prefetch;
  po.seed = o_.seed;
  po.loader_id = o_.loader_id;
  po.events = &events_;
  EpochStart start{plan->epoch, plan->first_batch, ++token_};
  Result<std::unique_ptr<Pipeline>> p = Pipeline::start(source_, pool_, std::move(plan), po);
  if (!p.ok()) return p.status();
  pipeline_ = std::move(p.value());
  return start;
}

Pipeline::Next Loader::next(int64_t token, std::optional<std::chrono::milliseconds> timeout) {
  std::shared_ptr<Pipeline> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (token != token_ || pipeline_ == nullptr) return Pipeline::Next{};
    p = pipeline_;
  }
  Pipeline::Next n = p->next(timeout);
  if (n.got == Pipeline::Got::kEnd || n.got == Pipeline::Got::kError) p->stop();  // join before returning
  return n;
}

void Loader::handed(int64_t token, int64_t batches) {
  std::lock_guard<std::mutex> lock(mu_);
  if (token == token_) sampler_.handed(batches);
}

void Loader::stop(int64_t token) {
  std::shared_ptr<Pipeline> p;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (token != -1 && token != token_) return;
    p = pipeline_;
  }
  if (p != nullptr) p->stop();
}

SamplerState Loader::state() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sampler_.state();
}

Status Loader::load_state(const SamplerState& state) {
  stop();
  std::lock_guard<std::mutex> lock(mu_);
  Status s = sampler_.load_state(state);
  if (s.ok()) ++token_;  // the epoch that ran is over: its iterator ends
  return s;
}

}  // namespace stallscope::loader

namespace stallscope::loader {

Status Loader::watch_copy(const SlotRef& slot, int device, uintptr_t stream, int64_t batch, int64_t bytes) {
  int64_t loader_id = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    loader_id = o_.loader_id;
  }
  std::lock_guard<std::mutex> lock(watcher_mu_);
  if (watcher_ == nullptr)
    watcher_ = std::make_unique<CopyWatcher>(fences_ ? std::move(fences_) : cuda_fences(), &events_);
  return watcher_->watch(slot, device, stream, loader_id, batch, bytes);
}

int64_t Loader::copies_pending() const {
  std::lock_guard<std::mutex> lock(watcher_mu_);
  return watcher_ == nullptr ? 0 : watcher_->pending();
}

void Loader::set_fences(std::unique_ptr<Fences> fences) {
  std::lock_guard<std::mutex> lock(watcher_mu_);
  fences_ = std::move(fences);
}

}  // namespace stallscope::loader
