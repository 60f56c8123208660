// Small helpers over /proc that every room may use: a /proc file read whole, the processes listed,
// a process's state letter, stat fields, status fields, executable and command line, and the one
// answer to "is this process still running".
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace stallscope::procfs {

// "/proc/PID/WHAT" ("/proc/PID/" for an empty WHAT).
std::string path(int pid, const char* what);

// Reads `file` whole, at most `max` bytes. False (and `out` empty) when it cannot be read or is
// empty: /proc files of a process that is gone.
bool read_file(const std::string& file, std::string* out, size_t max = size_t{1} << 20);
std::string read_file(const std::string& file, size_t max = size_t{1} << 20);

// The ids of the processes /proc lists now (its numeric entries), in directory order.
std::vector<int> pids();

// The fields of /proc/PID/stat after the command name, split at blanks: [0] the state letter,
// [1] the parent's pid, ... [19] the start time in clock ticks after boot (proc(5) numbers them
// from 3). Empty when it cannot be read.
std::vector<std::string> stat_fields(int pid);

// The value of `key` ("State", "TracerPid", ...) in the text of a /proc/PID/status file, blanks
// after the colon skipped; "" when absent.
std::string status_field(const std::string& status, const char* key);

// The path of the program process `pid` runs (the /proc/PID/exe link); "" when it cannot be read
// (the process is gone, or belongs to another user).
std::string exe(int pid);

// The state letter of /proc/PID/stat ('R', 'S', 'Z', ...), or '?' when it cannot be read.
char state(int pid);

// Whether process `pid` exists and has not exited. A zombie (exited, not yet reaped) has exited;
// a process of another user that this one may not signal still runs.
bool alive(int pid);

// The command line with spaces between the arguments, cut to `max_len` characters ("..." at the
// end when cut); "" when it cannot be read.
std::string cmdline(int pid, size_t max_len = 120);

}  // namespace stallscope::procfs
