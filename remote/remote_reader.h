// Recordings on another machine, read through `stallscope serve` (remote/link.h): a Reader and a
// RecordingTail whose calls the node answers, so that local and remote are one code path with two
// sources. Only what a call asks for crosses the link: the summaries of a whole run, the detail of
// a window, the rows since the last poll (one round trip per poll).
//
// When the link drops, calls fail with a transient error (Status::transient) and the next call
// reconnects (at most once a second); a tail resumes from where its last poll ended, so no row
// arrives twice or goes missing.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "storage/session_registry.h"

namespace stallscope::remote {

// Makes Reader::open and RecordingTail::open take ssh:// and tcp:// URIs. Call once at start.
void install();

// The node's live sessions and recent recordings (its session registry), for `stallscope ui
// ssh://host`. db_path is the node's path.
struct NodeSessions {
  std::string peer;  // the node's host name and stallscope version
  std::vector<SessionEntry> live, recent;
};
Result<NodeSessions> list_sessions(const std::string& uri);

// Whether `uri` names a node without a recording (ssh://host): the session list is wanted.
bool names_node_only(const std::string& uri);
// The URI of the recording `node_path` on the node of `uri`.
std::string recording_uri(const std::string& uri, const std::string& node_path);
// Bytes received from every node so far (what crossed the links), for the benchmark.
int64_t bytes_received();

}  // namespace stallscope::remote
