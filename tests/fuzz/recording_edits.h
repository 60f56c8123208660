// A recording for the fuzz targets that read recordings (fuzz_recording, fuzz_dashboard): a
// simulated DataLoader run (2 workers, config document, /proc counters) whose SQLite structure is
// sound but whose rows an input edits. An input is a list of edits, 4 bytes and a value each:
//   table (1 byte, of meta, strings, processes, threads, spans, instants, counter_tracks,
//   counters), row (2 bytes, modulo the table's rows), column (1 byte, modulo its columns), then
//   a kind byte: 0 NULL, 1 a 64-bit integer (8 bytes), 2 a double (8 bytes), 3 text (1 length
//   byte, then that many bytes), 4 delete the row.
// Edits the schema's constraints refuse are skipped. The strings table holds the JSON documents
// the hooks write (dl.config, dist.rank), so those are fuzzed too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace stallscope::fuzz {

// Writes the template with the input's edits to a file of this process (named by `tag`) and
// returns its path; the previous one of the same tag is replaced.
std::string mutated_recording(const uint8_t* data, size_t size, const std::string& tag);

}  // namespace stallscope::fuzz
