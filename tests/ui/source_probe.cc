// source_probe: follows one recording (a file or an ssh:// / tcp:// URI) with the dashboard's
// SnapshotSource, as the window does but without one, and prints a JSON line on each snapshot
// published: its state, the rows held, the latest time the data reaches, how far behind the
// wall clock that is (lag_ms: now - (start_real_ns + end_ns)), the link's error if it is down,
// and the bytes received from nodes so far. For the remote tests and bench/remote_bench.py.
//
//   source_probe PATH|URI [--seconds S] [--until-settled | --until-finished] [--detail-rows N] [--no-analysis]
//   source_probe --list ssh://host          the node's live sessions and recent recordings
// Exits 0 after S seconds (default 10) or, with --until-settled, once the first read and the
// analysis are done, with --until-finished once the recording is complete and read (3 when S
// seconds passed first; 1 on a read error, which is printed).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "remote/remote_reader.h"
#include "ui/analysis_view.h"
#include "ui/overview.h"
#include "ui/snapshot_source.h"

using namespace stallscope;

namespace {

int64_t wall_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string escaped(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o.push_back('\\');
    if (static_cast<unsigned char>(c) >= 0x20) o.push_back(c);
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr,
                 "usage: source_probe PATH|URI [--seconds S] [--until-settled] [--detail-rows N] [--no-analysis]\n");
    return 2;
  }
  remote::install();
  if (std::strcmp(argv[1], "--list") == 0 && argc > 2) {  // a node's sessions, one a line
    auto l = remote::list_sessions(argv[2]);
    if (!l.ok()) {
      std::fprintf(stderr, "source_probe: %s\n", l.status().message().c_str());
      return 1;
    }
    std::printf("peer %s\n", l->peer.c_str());
    for (const auto& e : l->live) std::printf("live %s\n", e.db_path.c_str());
    for (const auto& e : l->recent) std::printf("recent %s\n", e.db_path.c_str());
    return 0;
  }
  const std::string path = argv[1];
  double seconds = 10;
  bool until_settled = false, until_finished = false;
  ui::SourceOptions opt;
  opt.detail_rows = ui::default_detail_rows({path});  // as the dashboard, unless --detail-rows says
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (a == "--until-settled") {
      until_settled = true;
    } else if (a == "--until-finished") {
      until_finished = true;
    } else if (a == "--detail-rows" && i + 1 < argc) {
      opt.detail_rows = std::atoll(argv[++i]);
    } else if (a == "--no-analysis") {
      opt.analysis = false;
    } else {
      std::fprintf(stderr, "source_probe: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  opt.on_publish = [&](const ui::Snapshot& s) {
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    int64_t rows = 0, end_ns = 0, start_real = 0, overview_rows = 0, lanes = 0;
    std::string top;
    if (s.timeline) {
      rows = s.timeline->rows_read;
      lanes = static_cast<int64_t>(s.timeline->lanes.size());
      end_ns = s.timeline->end_ns;
      auto it = s.timeline->meta.find("start_real_ns");
      if (it != s.timeline->meta.end()) start_real = std::atoll(it->second.c_str());
      if (s.timeline->overview) overview_rows = s.timeline->overview->total_rows;
    }
    const double lag_ms =
        start_real > 0 && end_ns > 0 ? static_cast<double>(wall_ns() - (start_real + end_ns)) / 1e6 : -1;
    std::printf(
        "{\"t\": %.4f, \"state\": \"%s\", \"rows\": %lld, \"overview_rows\": %lld, \"lanes\": %lld, \"end_ns\": %lld, "
        "\"lag_ms\": %.1f, "
        "\"analysis\": %s, \"analysis_pending\": %s, \"link_error\": \"%s\", \"error\": \"%s\", \"bytes\": %lld}\n",
        t, ui::state_name(s.state), static_cast<long long>(rows), static_cast<long long>(overview_rows),
        static_cast<long long>(lanes), static_cast<long long>(end_ns), lag_ms, s.analysis ? "true" : "false",
        s.analysis_pending ? "true" : "false", escaped(s.link_error).c_str(), escaped(s.error).c_str(),
        static_cast<long long>(remote::bytes_received()));
    std::fflush(stdout);
  };
  ui::SnapshotSource source(path, opt);
  bool settled = false;
  if (until_settled) {
    settled = source.wait_until(ui::SnapshotSource::settled, static_cast<int>(seconds * 1000));
  } else if (until_finished) {
    settled = source.wait_until([](const ui::Snapshot& s) { return s.state == ui::SourceState::kFinished; },
                                static_cast<int>(seconds * 1000));
  } else {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }
  const auto s = source.current();
  if (s->state == ui::SourceState::kError) {
    std::fprintf(stderr, "source_probe: %s\n", s->error.c_str());
    return 1;
  }
  return (until_settled || until_finished) && !settled ? 3 : 0;
}
