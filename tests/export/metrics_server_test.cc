// The endpoint's HTTP side and the scrape: MetricsServer serves what its handler returns, refuses a
// port in use with one line and stops; LiveMetrics answers stallscope_up 0 until the recording
// exists, then reads it.
#include "export/metrics_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "export/live_metrics.h"
#include "tests/analysis/fixture.h"
#include "tests/unit/test_util.h"

namespace stallscope::metrics {
namespace {

// A port no one listens on now.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// GET `path` over HTTP/1.0; the whole answer, headers included ("" when nothing listens).
std::string http_get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return "";
  }
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  EXPECT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  return out;
}

TEST(MetricsServerTest, ServesRefusesABusyPortAndStops) {
  if (!MetricsServer::available()) GTEST_SKIP() << "built without cpp-httplib";
  const int port = free_port();
  auto server = MetricsServer::start("127.0.0.1", port, [] { return std::string("stallscope_up 1\n"); });
  ASSERT_TRUE(server.ok()) << server.status().message();
  const std::string answer = http_get(port, "/metrics");
  EXPECT_NE(answer.find("200 OK"), std::string::npos) << answer;
  EXPECT_NE(answer.find("text/plain; version=0.0.4"), std::string::npos) << answer;
  EXPECT_NE(answer.find("\r\n\r\nstallscope_up 1\n"), std::string::npos) << answer;
  EXPECT_NE(http_get(port, "/nothing").find("404"), std::string::npos);

  auto second = MetricsServer::start("127.0.0.1", port, [] { return std::string(); });
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(), "cannot listen on 127.0.0.1:" + std::to_string(port) + ": the port is in use");

  (*server)->stop();
  EXPECT_EQ(http_get(port, "/metrics"), "");
  (*server)->stop();  // again: nothing
}

TEST(MetricsServerTest, StopsRightAfterStart) {
  if (!MetricsServer::available()) GTEST_SKIP() << "built without cpp-httplib";
  for (int i = 0; i < 20; ++i) {
    auto server = MetricsServer::start("127.0.0.1", free_port(), [] { return std::string(); });
    ASSERT_TRUE(server.ok()) << server.status().message();
  }  // each destroyed (stopped and joined) at once
}

TEST(LiveMetricsTest, UpOnlyOnceTheRecordingIsThere) {
  testing::TempDir dir;
  const std::string path = dir.file("late.db");
  std::string known;  // the path is not known at first, as for `attach` without -o
  LiveMetrics live([&known] { return known; }, session_labels("", {{"RANK", "7"}}, ""));
  EXPECT_NE(live.scrape().find("stallscope_up{job=\"\",rank=\"7\","), std::string::npos);
  known = path;
  EXPECT_NE(live.scrape().find("stallscope_up{job=\"late\",rank=\"7\",host=\""), std::string::npos);
  EXPECT_NE(live.scrape().find("} 0\n"), std::string::npos);  // no file yet: up 0
  testing::SimConfig c;
  c.batches_per_epoch = 10;
  {
    testing::RecordingBuilder b(path);
    testing::simulate(b, c);
  }
  const std::string text = live.scrape();
  EXPECT_NE(text.find("stallscope_up{job=\"late\",rank=\"7\",host=\""), std::string::npos);
  EXPECT_NE(text.find("\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("stallscope_steps_total{job=\"late\",rank=\"7\",host="), std::string::npos);
  EXPECT_NE(text.find("} 10\n"), std::string::npos) << text;
}

TEST(LiveMetricsTest, Labels) {
  const Labels a = session_labels("", {{"TORCHELASTIC_RUN_ID", "run-42"}, {"RANK", "3"}}, "/x/y/run.db");
  EXPECT_EQ(a.job, "run-42");
  EXPECT_EQ(a.rank, "3");
  EXPECT_FALSE(a.host.empty());
  const Labels b = session_labels("mine", {{"TORCHELASTIC_RUN_ID", "run-42"}}, "/x/y/run.db");
  EXPECT_EQ(b.job, "mine");
  EXPECT_EQ(b.rank, "0");
  EXPECT_EQ(session_labels("", {}, "/x/y/run.db").job, "run");
}

}  // namespace
}  // namespace stallscope::metrics
