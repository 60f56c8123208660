// The Python source that runs inside a target process. libstallscope.so's attach entry points
// (ss_attach_begin, ss_attach_end) take it as a string and run it on a thread that holds the GIL;
// it imports the stallscope package from the build and calls one function of stallscope._attach
// (python/stallscope/_attach.py), which reports into the status file (attach_status.h).
#pragma once

#include <string>
#include <vector>

namespace stallscope::attach {

// Source that imports the stallscope package from `python_dir` without touching sys.path, calls
// stallscope._attach.FUNC(*args), and writes any failure into the status file at `status_path`
// ("error Type: message"). Runs in a fresh namespace (not __main__'s).
std::string python_source(const std::string& python_dir, const std::string& func, const std::vector<std::string>& args,
                          const std::string& status_path);

}  // namespace stallscope::attach
