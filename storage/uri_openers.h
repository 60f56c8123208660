// Who opens the URIs of each scheme (ssh://, tcp://): Reader's and RecordingTail's registries, set
// by remote::install() before any thread opens one.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace stallscope {

template <typename Opener>
class UriOpeners {
 public:
  void set(const std::string& scheme, Opener opener) {
    std::lock_guard<std::mutex> lock(mu_);
    by_scheme_[scheme] = std::move(opener);
  }
  // The opener of `uri`'s scheme (the part before "://"); an empty one when none was set.
  Opener of(const std::string& uri) const {
    const std::string scheme = uri.substr(0, uri.find("://"));
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_scheme_.find(scheme);
    return it == by_scheme_.end() ? Opener{} : it->second;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, Opener> by_scheme_;
};

}  // namespace stallscope
