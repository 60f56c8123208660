// The text of a batch's life, stage by stage; see batch_life.h.
#include "ui/batch_life.h"

#include <optional>

#include "ui/format.h"

namespace stallscope::ui {

const analysis::BatchInfo* find_batch(const Frame& f, const BatchKey& k) {
  if (!f.an) return nullptr;
  return f.an->model.batch(k.loader, k.epoch, k.batch);
}

std::string batch_title(const analysis::BatchInfo& b) {
  return "batch " + std::to_string(b.batch) + "  loader " + std::to_string(b.loader) + "  epoch " +
         std::to_string(b.epoch);
}

std::vector<std::string> batch_life(const Frame& f, const analysis::BatchInfo& b) {
  std::vector<std::string> out;
  const bool uni = f.fonts && f.fonts->unicode;
  const char* arrow = uni ? " \xe2\x86\x92 " : " -> ";
  std::optional<int64_t> origin = b.sent_ns ? b.sent_ns : b.fetch_start_ns;
  auto rel = [&](int64_t t) {
    if (!origin) return fmt_time(static_cast<double>(t), 6);
    return "+" + fmt_duration(static_cast<double>(t - *origin));
  };
  auto worker = [&]() -> std::string {
    if (b.worker == -1) return "the main process";
    if (b.worker < 0) return "an unknown worker";
    return "worker " + std::to_string(b.worker) + " (pid " + std::to_string(b.worker_pid) + ")";
  };
  if (b.sent_ns) out.push_back("sent     at " + fmt_time(static_cast<double>(*b.sent_ns), 6) + " to " + worker());
  if (b.fetch_start_ns) {
    std::string s = "fetch    " + rel(*b.fetch_start_ns);
    if (b.fetch_end_ns) {
      s += arrow + rel(*b.fetch_end_ns) + "  (" +
           fmt_duration(static_cast<double>(*b.fetch_end_ns - *b.fetch_start_ns)) + ")";
    }
    s += "  by " + worker();
    if (b.samples) s += ", " + std::to_string(*b.samples) + " samples";
    out.push_back(s);
  }
  if (b.put_ns) out.push_back("put      " + rel(*b.put_ns));
  // Pinning: the pin-memory thread's dl.pin span for this batch, between put and hand-off.
  if (f.tl && b.put_ns) {
    const int64_t until = b.handed_ns ? *b.handed_ns : (b.recv_ns ? *b.recv_ns : *b.put_ns + 60'000'000'000);
    for (const Lane& l : f.tl->lanes) {
      if (l.role != LaneRole::kPin) continue;
      for (const Track& t : l.tracks) {
        for (const Row& r : t.rows) {
          size_t i = r.first_starting_at_or_after(*b.put_ns);
          for (size_t k = 0; k < 256 && i < r.size() && r[i].start_ns <= until; ++k, ++i) {
            if (r[i].style == Style::kPin && r[i].a1 == b.batch && r[i].a0 == b.loader) {
              out.push_back("pin      " + rel(r[i].start_ns) + arrow + rel(r[i].end_ns) + "  (" +
                            fmt_duration(static_cast<double>(r[i].end_ns - r[i].start_ns)) + ")");
              k = 256;
              break;
            }
          }
        }
      }
    }
  }
  if (b.recv_ns) out.push_back("recv     " + rel(*b.recv_ns));
  if (b.handed_ns) {
    std::string s = "handed   " + rel(*b.handed_ns);
    if (b.put_ns) s += "  (ready for " + fmt_duration(static_cast<double>(*b.handed_ns - *b.put_ns)) + ")";
    out.push_back(s);
  } else {
    out.push_back("handed   not (yet) handed to the loop");
  }
  if (origin && b.handed_ns)
    out.push_back("total    " + fmt_duration(static_cast<double>(*b.handed_ns - *origin)) + " from sent to handed");
  return out;
}

}  // namespace stallscope::ui
