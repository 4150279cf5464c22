// OnLoopThread: a callback that a store may call on any thread, run on the
// loop's thread (the Redis store answers on a thread of its own) and only
// while its owner lives. The wrapper touches nothing of the owner off the
// loop: the owner may be destroyed on the loop meanwhile (the loop outlives
// it). Used by the layers that call a ServingQueue from the server's loop
// (src/push, src/schedule).
#ifndef DELAYQ_NET_ON_LOOP_H_
#define DELAYQ_NET_ON_LOOP_H_

#include <functional>
#include <memory>
#include <thread>
#include <utility>

#include "net/event_loop.h"

namespace delayq::net {

// `alive`: the owner's flag, false (or gone) once it is destroyed.
// `loop_thread`: the thread that runs `loop`.
template <typename T>
std::function<void(T)> OnLoopThread(EventLoop* loop, std::thread::id loop_thread,
                                    std::weak_ptr<bool> alive, std::function<void(T)> fn) {
  return [loop, loop_thread, alive = std::move(alive), fn = std::move(fn)](T value) mutable {
    if (std::this_thread::get_id() == loop_thread) {
      if (auto a = alive.lock(); a && *a) fn(std::move(value));
      return;
    }
    auto shared = std::make_shared<T>(std::move(value));
    loop->Post([alive, fn = std::move(fn), shared]() mutable {
      if (auto a = alive.lock(); a && *a) fn(std::move(*shared));
    });
  };
}

}  // namespace delayq::net

#endif  // DELAYQ_NET_ON_LOOP_H_
