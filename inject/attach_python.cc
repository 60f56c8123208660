// The Python source run inside a target; see attach_python.h.
#include "inject/attach_python.h"

namespace stallscope::attach {
namespace {

// A Python string expression for any bytes: no quoting rules to get wrong.
std::string py_str(const std::string& s) {
  static const char* hex = "0123456789abcdef";
  std::string h;
  for (unsigned char c : s) {
    h += hex[c >> 4];
    h += hex[c & 15];
  }
  return "bytes.fromhex('" + h + "').decode()";
}

}  // namespace

std::string python_source(const std::string& python_dir, const std::string& func, const std::vector<std::string>& args,
                          const std::string& status_path) {
  const std::string pkg = py_str(python_dir + "/stallscope");
  std::string call_args;
  for (const std::string& a : args) call_args += (call_args.empty() ? "" : ", ") + py_str(a);
  std::string body =
      "import sys\n"
      "try:\n"
      "    if 'stallscope' not in sys.modules:\n"
      "        import importlib.util\n"
      "        pkg = " +
      pkg +
      "\n"
      "        spec = importlib.util.spec_from_file_location('stallscope', pkg + '/__init__.py', "
      "submodule_search_locations=[pkg])\n"
      "        mod = importlib.util.module_from_spec(spec)\n"
      "        sys.modules['stallscope'] = mod\n"
      "        try:\n"
      "            spec.loader.exec_module(mod)\n"
      "        except BaseException:\n"
      "            sys.modules.pop('stallscope', None)\n"
      "            raise\n"
      "    from stallscope import _attach\n"
      "    _attach." +
      func + "(" + call_args +
      ")\n"
      "except BaseException as e:\n"
      "    try:\n"
      "        with open(" +
      py_str(status_path) +
      ", 'w') as f:\n"
      "            f.write('error ' + type(e).__name__ + ': ' + str(e))\n"
      "    except BaseException:\n"
      "        pass\n";
  return "exec(" + py_str(body) + ", {'__name__': '__stallscope_attach__'})";
}

}  // namespace stallscope::attach
