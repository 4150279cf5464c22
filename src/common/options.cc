#include "delayq/options.h"

namespace delayq {

std::optional<StoreKind> ParseStoreKind(std::string_view name) {
  if (name == "memory") return StoreKind::kMemory;
  if (name == "embedded") return StoreKind::kEmbedded;
  if (name == "redis") return StoreKind::kRedis;
  if (name == "remote") return StoreKind::kRemote;
  return std::nullopt;
}

std::string_view StoreKindName(StoreKind store) {
  switch (store) {
    case StoreKind::kMemory:
      return "memory";
    case StoreKind::kEmbedded:
      return "embedded";
    case StoreKind::kRedis:
      return "redis";
    case StoreKind::kRemote:
      return "remote";
  }
  return "?";
}

std::optional<FsyncPolicy> ParseFsyncPolicy(std::string_view name) {
  if (name == "always") return FsyncPolicy::kAlways;
  if (name == "everysec") return FsyncPolicy::kEverySec;
  if (name == "never") return FsyncPolicy::kNever;
  return std::nullopt;
}

std::string_view FsyncPolicyName(FsyncPolicy policy) {
  switch (policy) {
    case FsyncPolicy::kAlways:
      return "always";
    case FsyncPolicy::kEverySec:
      return "everysec";
    case FsyncPolicy::kNever:
      return "never";
  }
  return "?";
}

}  // namespace delayq
