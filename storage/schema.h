// The session database schema (documented for users in docs/schema.md). Versioned with
// PRAGMA user_version and marked as ours with PRAGMA application_id; self-describing: event kinds
// and the unit of every numeric column live in tables.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "storage/sqlite.h"

namespace stallscope {

inline constexpr int32_t kApplicationId = 0x53544c53;  // "STLS"
inline constexpr int kSchemaVersion = 2;

// Creates every table of a new recording.
Status create_schema(Db& db);
// Creates the tables version 2 added (the summaries), inside the caller's transaction. With
// `temporary`, as TEMP tables of this connection only (no rows in `units`): a read-only connection
// can make them, and its queries then find them under the same names.
Status create_summary_tables(Db& db, bool temporary = false);
// Checks that `db` is a stallscope recording this build can read; the error is one line that says
// what the file is and what to do.
Status check_schema(Db& db);

}  // namespace stallscope
