// Export benchmark: `stallscope export` of the dashboard benchmark's synthetic hour of training
// (tests/ui/sim_recording.h: ~10 M events; and a ~1 M-event one to see how memory scales), as the
// Perfetto JSON trace and as CSV. Each export runs as its own process (its peak RSS is its own),
// the formats and sizes interleaved, repeated; prints the median time, events per second, output
// size and peak RSS with the goals beside (10 M events in seconds: < 20 s; memory that does not
// grow with the events: peak RSS at 10 M / at 1 M <= 1.5).
//
//   export_bench --stallscope PATH [--reps N] [--events N]   (the recordings are made once and kept
//                                                              as $TMPDIR/stallscope-ui-bench-<N>M.db)
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "bench/bench_rows.h"
#include "storage/reader.h"
#include "tests/ui/sim_recording.h"

namespace {

using Clock = std::chrono::steady_clock;

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

int64_t size_of(const std::string& p) {
  struct stat st;
  if (::stat(p.c_str(), &st) != 0) return 0;
  if (!S_ISDIR(st.st_mode)) return st.st_size;
  int64_t total = 0;
  for (const char* f : {"spans.csv", "instants.csv", "counters.csv", "gpu_activities.csv", "processes.csv"}) {
    total += size_of(p + "/" + f);
  }
  return total;
}

struct Run {
  double seconds = 0;
  long rss_kib = 0;
  int status = -1;
};

Run run_export(const std::string& bin, const std::string& db, const std::string& format, const std::string& out) {
  const auto t0 = Clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl(bin.c_str(), bin.c_str(), "export", "-q", "--force", "--format", format.c_str(), db.c_str(), "-o",
            out.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  Run r;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.rss_kib = ru.ru_maxrss;
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string recording(int64_t events) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string db =
      std::string(tmp && *tmp ? tmp : "/tmp") + "/stallscope-ui-bench-" + std::to_string(events / 1000000) + "M.db";
  if (!exists(db)) {
    std::printf("generating %s ...\n", db.c_str());
    std::fflush(stdout);
    stallscope::testing::write_sim_recording(db, stallscope::testing::hour_of_training(events));
  }
  return db;
}

// Rows in the recording: spans, instants, counter samples, GPU activities.
int64_t events_in(const std::string& db) {
  auto reader = stallscope::Reader::open(db);
  if (!reader.ok()) return 0;
  int64_t n = 0;
  for (const char* t : {"spans", "instants", "counters", "gpu_activities"}) {
    auto c = (*reader)->count(t);
    n += c.ok() ? *c : 0;
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  std::string bin;
  int reps = 3;
  int64_t events = 10'000'000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--stallscope" && i + 1 < argc) {
      bin = argv[++i];
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--events" && i + 1 < argc) {
      events = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: export_bench --stallscope PATH [--reps N] [--events N]\n");
      return 2;
    }
  }
  if (bin.empty() || !exists(bin)) {
    std::fprintf(stderr, "export_bench: give the stallscope executable with --stallscope (build/bin/stallscope)\n");
    return 2;
  }
  const std::vector<int64_t> sizes = {events / 10, events};
  std::map<int64_t, std::string> dbs;
  for (int64_t n : sizes) dbs[n] = recording(n);
  const char* tmp = std::getenv("TMPDIR");
  const std::string out_dir = std::string(tmp && *tmp ? tmp : "/tmp");

  // (events, format) -> runs; the order turns each repetition.
  std::map<std::pair<int64_t, std::string>, std::vector<Run>> runs;
  std::vector<std::pair<int64_t, std::string>> order;
  for (int64_t n : sizes) {
    for (const char* f : {"perfetto", "csv"}) order.emplace_back(n, f);
  }
  std::map<std::pair<int64_t, std::string>, int64_t> out_bytes;
  for (int r = 0; r < reps; ++r) {
    for (size_t k = 0; k < order.size(); ++k) {
      const auto& [n, f] = order[(k + static_cast<size_t>(r)) % order.size()];
      const std::string out = out_dir + "/stallscope-export-bench" + (f == "csv" ? "-csv" : ".json");
      Run run = run_export(bin, dbs[n], f, out);
      if (run.status != 0) {
        std::fprintf(stderr, "export_bench: stallscope export failed (status %d)\n", run.status);
        return 1;
      }
      out_bytes[{n, f}] = size_of(out);
      runs[{n, f}].push_back(run);
    }
  }

  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("\nstallscope export, %d repetitions interleaved (median)\n", reps);
  std::printf("%-10s %-9s %9s %12s %10s %11s   %s\n", "events", "format", "seconds", "events/s", "output MB",
              "peak RSS MB", "goal");
  std::map<std::string, std::map<int64_t, double>> rss;
  for (int64_t n : sizes) {
    for (const char* f : {"perfetto", "csv"}) {
      std::vector<double> secs, mem;
      for (const Run& r : runs[{n, f}]) {
        secs.push_back(r.seconds);
        mem.push_back(static_cast<double>(r.rss_kib) / 1024.0);
      }
      const double s = median(secs);
      rss[f][n] = median(mem);
      const int64_t rows = events_in(dbs[n]);
      std::printf("%-10lld %-9s %9.2f %12.0f %10.0f %11.0f   %s\n", static_cast<long long>(rows), f, s,
                  static_cast<double>(rows) / s, static_cast<double>(out_bytes[{n, f}]) / 1e6, rss[f][n],
                  n == sizes.back() ? "< 20 s" : "");
      if (n == sizes.back()) {
        stallscope::bench::bench_row(
            std::string("export, ") + (std::string(f) == "csv" ? "CSV" : "Perfetto JSON") + ", " +
                stallscope::bench::fmt("%.1f M events", static_cast<double>(rows) / 1e6),
            stallscope::bench::fmt("%.1f s", s) + stallscope::bench::fmt(", peak RSS %.0f MB", rss[f][n]), "< 20 s", "",
            s < 20);
      }
    }
  }
  std::printf("\npeak RSS at %lld events / at %lld events (goal <= 1.5: memory bounded):\n",
              static_cast<long long>(sizes.back()), static_cast<long long>(sizes.front()));
  for (const char* f : {"perfetto", "csv"}) {
    std::printf("  %-9s %.2f\n", f, rss[f][sizes.back()] / rss[f][sizes.front()]);
  }
  return 0;
}
