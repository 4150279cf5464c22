// GET /metrics: the queue's numbers in the Prometheus text format 0.0.4.
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "schedule/scheduler.h"
#include "server/http_api.h"
#include "server/lateness.h"
#include "wire/encode.h"

namespace delayq::server {

// Prometheus text format 0.0.4.
void HttpServer::Api::Metrics(Connection& c, const RouteCall&) {
  // Two calls, one after the other, answered as one.
  ServingQueue* q = s_->queue_;
  AwaitWith<Result<MetricsData>, &Api::MetricsReply>(
      c, [q](std::function<void(Result<MetricsData>)> done) {
        q->StatsAsync([q, done = std::move(done)](Result<QueueStats> st) mutable {
          if (!st.ok()) return done(st.status());
          q->TopicsAsync([st = *st, done = std::move(done)](Result<std::vector<TopicInfo>> topics) {
            if (!topics.ok()) return done(topics.status());
            done(MetricsData{st, std::move(topics).value()});
          });
        });
      });
}

void HttpServer::Api::MetricsReply(Connection& c, const Result<MetricsData>& r) {
  if (!r.ok()) return Error(c, r.status());
  const QueueStats& st = r->stats;
  const std::vector<TopicInfo>* topics = &r->topics;
  std::string& t = json_;
  t.clear();
  auto metric = [&t](std::string_view name, std::string_view type, std::string_view help) {
    wire::AppendMetricHeader(&t, name, type, help);
  };
  auto sample = [&t](std::string_view name, std::string_view labels, uint64_t v) {
    wire::AppendSample(&t, name, labels, v);
  };
  wire::AppendMetrics(&t, st, wire::kStatsFields);
  if (const schedule::Scheduler* scheduler = s_->scheduler_) {
    wire::AppendMetrics(&t, scheduler->stats(),
                        wire::kSchedulerStatsFields<schedule::SchedulerStats>);
  }
  if (const LatenessHistogram* late = s_->lateness_) {
    metric("delayq_due_lateness_seconds", "histogram",
           "From a job's run_at to its delivery to a reserve that was waiting for it.");
    for (const char* le : {"0.0005", "0.001", "0.002", "0.005", "0.01", "0.1", "1"}) {
      uint64_t us = static_cast<uint64_t>(std::stod(le) * 1e6 + 0.5);
      sample("delayq_due_lateness_seconds_bucket", std::string("le=\"") + le + "\"",
             late->CountAtMost(us));
    }
    sample("delayq_due_lateness_seconds_bucket", "le=\"+Inf\"", late->count());
    t.append("delayq_due_lateness_seconds_sum ")
        .append(std::to_string(static_cast<double>(late->sum_us()) / 1e6))
        .append("\n");
    sample("delayq_due_lateness_seconds_count", "", late->count());
  }
  for (const auto& [k, v] : s_->StoreFields()) {
    std::string name = "delayq_store_" + std::string(k);
    metric(name, "gauge", "The store's own figures (see /v1/stats in docs/api.md).");
    sample(name, "", v);
  }
  metric("delayq_http_connections", "gauge", "Open HTTP connections.");
  sample("delayq_http_connections", "", s_->connections());
  metric("delayq_topic_jobs", "gauge", "Live jobs of a topic by state.");
  for (const TopicInfo& ti : *topics) {
    // Topic names are [A-Za-z0-9._:-]: nothing to escape in a label value.
    std::string base = "topic=\"" + ti.name + "\",state=";
    sample("delayq_topic_jobs", base + "\"delayed\"", ti.delayed);
    sample("delayq_topic_jobs", base + "\"ready\"", ti.ready);
    sample("delayq_topic_jobs", base + "\"reserved\"", ti.reserved);
    sample("delayq_topic_jobs", base + "\"buried\"", ti.buried);
  }
  Respond(c, 200, "text/plain; version=0.0.4", t);
}

}  // namespace delayq::server
