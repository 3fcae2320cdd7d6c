// A C++ fleet worker on PostgreSQL: takes posted input, runs turns through the
// step-boundary protocol, and survives being killed, because another worker takes the
// session over.
//
//     worker [URL]      the demonstration (URL default: $INBOXLOG_TEST_PG, else the
//                       local server; tables in $INBOXLOG_TEST_PG_SCHEMA, else
//                       inboxlog_worker)
//
// The demonstration posts four prompts to one session and runs three worker processes
// (this program again, `worker --work NAME ...`), watching the log with a follower:
//   1. worker a answers p1, then stalls inside its turn for p2 (its model call never
//      returns) and is killed with SIGKILL;
//   2. worker b opens the session (the dead owner released it), finds the turn closed
//      as interrupted, puts p2 back at the head of the inbox and answers p2 and p3;
//      then p4, posted while b runs, makes b stall too: alive, but stuck;
//   3. worker c opens the session with takeover and answers p4; when b wakes up its
//      next write is refused as fenced, having written nothing, and b stops.
// At the end every prompt was answered exactly once and the log verifies.
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "inboxlog.hpp"

namespace {

const char *const kSession = "support-1";
volatile std::sig_atomic_t stopping = 0;
const char *program = "worker"; // argv[0], to start workers with
std::vector<pid_t> children;     // the workers started, reaped when they exit

std::string env(const char *name, const char *fallback) {
    const char *value = std::getenv(name);
    return value != nullptr && *value != '\0' ? value : fallback;
}

inboxlog::Store connect(const std::string &url) {
    const std::string schema = env("INBOXLOG_TEST_PG_SCHEMA", "inboxlog_worker");
    return inboxlog::Store::postgres(url, R"({"schema":")" + schema + R"("})");
}

/// The string value of `"key":"…"` in `json`, for the plain values this example writes.
std::string field(const std::string &json, const std::string &key) {
    const std::string marker = "\"" + key + "\":\"";
    const std::size_t at = json.find(marker);
    if (at == std::string::npos) return {};
    const std::size_t start = at + marker.size();
    return json.substr(start, json.find('"', start) - start);
}

/// Puts back, at the head of next-turn and in their order, the prompts of the turn that
/// opening closed as interrupted: entered into a step, never answered.
void requeue_interrupted(inboxlog::Session &s, const std::string &name) {
    const inboxlog::Events events(s.events());
    std::size_t start = 0;
    for (std::size_t i = 0; i < events.size(); ++i) {
        if (events[i].find(R"("type":"turn/start")") != std::string::npos) start = i;
    }
    std::vector<std::string> lost;
    for (std::size_t i = start; i < events.size(); ++i) {
        if (events[i].find(R"("type":"user/message")") == std::string::npos) continue;
        const std::string id = field(events[i], "id");
        bool answered = false;
        for (std::size_t j = i; j < events.size(); ++j) {
            answered = answered || events[j].find(R"("answers":")" + id + "\"") != std::string::npos;
        }
        if (answered) continue;
        const std::size_t data = events[i].find(R"("data":)") + 7;
        const std::size_t end = events[i].rfind(R"(,"surfaceOp")");
        lost.push_back(events[i].substr(data, end - data));
    }
    for (auto m = lost.rbegin(); m != lost.rend(); ++m) s.inbox_prepend("next-turn", *m);
    std::printf("%s: its last turn was interrupted; re-queued %zu prompt(s)\n", name.c_str(), lost.size());
}

/// One turn through the step-boundary protocol: each step claims the input waiting
/// (posts are taken in first), the scripted model answers every message of the batch,
/// and steering that arrived meanwhile gets a step of its own. `stall_on`: the prompt
/// whose model call never returns (the process stops itself there).
void run_turn(inboxlog::Session &s, const std::string &name, const std::string &stall_on) {
    s.open_turn();
    for (;;) {
        const std::string proposal = s.propose_step(); // {"turn":N,"step":K,"messages":[…]}
        const std::size_t at = proposal.find(R"("messages":)") + 11;
        const std::string batch = proposal.substr(at, proposal.size() - at - 1);
        const std::string place = proposal.substr(1, proposal.find(R"(,"messages":)") - 1); // "turn":N,"step":K
        // Pre-step plugins would rewrite or reject the batch here; this worker enters it.
        if (s.decide(R"({"kind":"enter","messages":)" + batch + "}").find("turn-end") != std::string::npos) return;
        for (const std::string &message : inboxlog::Events(batch)) {
            const std::string id = field(message, "id");
            if (id == stall_on) {
                std::printf("%s: model call for %s hangs\n", name.c_str(), id.c_str());
                std::raise(SIGSTOP); // stands in for a call that never returns
            }
            // The answer in SPEC §15.1's shape, then this worker's own keys: the prompt it
            // answers and the worker that answered it.
            const std::string text = "done with " + field(message, "content");
            s.append("assistant/message",
                     "{" + place + R"(,"message":{"id":"answer-)" + id + R"(","role":"assistant",)" +
                         R"("content":[{"type":"text","text":")" + text + R"("}],)" +
                         R"("source":{"kind":"model","provider":"scripted","model":"worker"}},)" +
                         R"("answers":")" + id + R"(","worker":")" + name + R"("})",
                     R"({"surfaceOp":"append"})");
        }
        if (!s.end_step("completed")) break;
    }
    s.close_turn();
}

/// One worker process: owns the session, answers each prompt in a turn of its own
/// until SIGTERM, or until another worker takes the session over.
int work(const std::string &url, const std::string &name, bool takeover, const std::string &stall_on) {
    std::signal(SIGTERM, [](int) { stopping = 1; });
    const auto store = connect(url);
    std::optional<inboxlog::Session> opened;
    // A killed owner's session is free at once; wait a little for a live one to close.
    for (int attempt = 0; !opened; ++attempt) {
        try {
            opened.emplace(store.open(kSession, takeover));
        } catch (const inboxlog::Error &e) {
            if (e.code() != INBOXLOG_STATUS_LOCKED || attempt == 200) throw;
            std::this_thread::sleep_for(std::chrono::milliseconds(25));
        }
    }
    inboxlog::Session &s = *opened;
    std::printf("%s: owns %s%s\n", name.c_str(), kSession, takeover ? " (taken over)" : "");
    if (s.open_report().find(R"("repairedTurn":null)") == std::string::npos) requeue_interrupted(s, name);
    try {
        while (stopping == 0) {
            s.receive();
            if (s.next_turn() == "[]") {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
                continue;
            }
            run_turn(s, name, stall_on);
        }
    } catch (const inboxlog::Error &e) {
        if (e.code() != INBOXLOG_STATUS_FENCED) throw;
        std::printf("%s: fenced (%s); stopping, nothing written\n", name.c_str(), e.what());
        return 0;
    }
    s.close();
    std::printf("%s: stopped\n", name.c_str());
    return 0;
}

/// Starts this program again as worker `name`.
pid_t spawn(const std::string &url, const std::string &name, bool takeover, const std::string &stall_on) {
    std::vector<std::string> args = {program, "--work", name, url, takeover ? "takeover" : "open", stall_on};
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        execv(program, argv.data());
        _exit(127);
    }
    if (pid < 0) throw std::runtime_error("worker: fork failed");
    children.push_back(pid);
    return pid;
}

/// Waits until worker `pid` stops itself (its model call hangs); false if it exited.
bool wait_stopped(pid_t pid) {
    int status = 0;
    return waitpid(pid, &status, WUNTRACED) == pid && WIFSTOPPED(status);
}

/// Waits for worker `pid` to exit; whether it exited with status 0.
bool wait_exited(pid_t pid) {
    int status = 0;
    const bool reaped = waitpid(pid, &status, 0) == pid;
    if (reaped) children.erase(std::find(children.begin(), children.end(), pid));
    return reaped && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/// After a failure: no worker outlives the demonstration (a stopped one least of all).
void kill_children() {
    for (const pid_t pid : children) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
    }
    children.clear();
}

/// Follows the log until an answer to `id` went by, printing what the workers do.
bool watch_until_answered(const inboxlog::Follower &follower, const std::string &id) {
    for (int polls = 0; polls < 300; ++polls) {
        for (const std::string &e : follower.poll(std::chrono::milliseconds(100))) {
            if (e.find(R"("type":"assistant/message")") != std::string::npos) {
                std::printf("  log: %s answered %s\n", field(e, "worker").c_str(), field(e, "answers").c_str());
                if (field(e, "answers") == id) return true;
            } else if (e.find(R"("kind":"interrupted")") != std::string::npos) {
                std::printf("  log: turn closed as interrupted\n");
            } else if (e.find(R"("post":")") != std::string::npos) {
                std::printf("  log: took in post %s\n", field(e, "post").c_str());
            }
        }
    }
    return false;
}

int demo(const std::string &url) {
    const auto store = connect(url);
    try {
        store.remove(kSession);
    } catch (const inboxlog::Error &e) {
        if (e.code() != INBOXLOG_STATUS_NOT_FOUND) throw;
    }
    store.create(kSession).close();
    const auto follower = store.follow(kSession);
    for (const char *p : {R"({"id":"p1","content":"hello"})", R"({"id":"p2","content":"a hard one"})",
                          R"({"id":"p3","content":"one more"})"}) {
        std::printf("posted %s\n", store.post(kSession, "next-turn", p).c_str());
    }

    const pid_t a = spawn(url, "a", false, "p2");
    if (!wait_stopped(a)) throw std::runtime_error("worker: a did not reach its hanging call");
    std::printf("killing a (pid %d) with SIGKILL inside its turn\n", static_cast<int>(a));
    kill(a, SIGKILL);
    wait_exited(a);

    const pid_t b = spawn(url, "b", false, "p4");
    if (!watch_until_answered(follower, "p3")) throw std::runtime_error("worker: p3 was never answered");
    std::printf("posted %s\n", store.post(kSession, "next-turn", R"({"id":"p4","content":"the last"})").c_str());
    if (!wait_stopped(b)) throw std::runtime_error("worker: b did not reach its hanging call");
    std::printf("b (pid %d) is stuck; c takes the session over\n", static_cast<int>(b));

    const pid_t c = spawn(url, "c", true, "");
    if (!watch_until_answered(follower, "p4")) throw std::runtime_error("worker: p4 was never answered");
    kill(b, SIGCONT);
    if (!wait_exited(b)) throw std::runtime_error("worker: b failed after waking up");
    kill(c, SIGTERM);
    if (!wait_exited(c)) throw std::runtime_error("worker: c failed");

    // Every prompt answered exactly once, and the log opens cleanly.
    const std::string log = store.inspect(kSession);
    for (const char *id : {"p1", "p2", "p3", "p4"}) {
        const std::string answer = std::string(R"("answers":")") + id + "\"";
        const std::size_t first = log.find(answer);
        if (first == std::string::npos || log.find(answer, first + 1) != std::string::npos) {
            throw std::runtime_error(std::string("worker: ") + id + " was not answered exactly once");
        }
    }
    store.verify(kSession);
    std::printf("every prompt answered exactly once; the log verifies\n");
    return 0;
}

} // namespace

int main(int argc, char **argv) {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    // Workers are this program again: by the path it was started with, else its own.
    program = std::string(argv[0]).find('/') != std::string::npos ? argv[0] : "/proc/self/exe";
    try {
        if (argc == 6 && std::string(argv[1]) == "--work") {
            return work(argv[3], argv[2], std::string(argv[4]) == "takeover", argv[5]);
        }
        const std::string url = argc > 1 ? argv[1] : env("INBOXLOG_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test");
        return demo(url);
    } catch (const inboxlog::Error &e) {
        std::fprintf(stderr, "worker: %s (%s)\n", e.what(), e.kind().c_str());
    } catch (const std::exception &e) {
        std::fprintf(stderr, "%s\n", e.what());
    }
    kill_children();
    return 1;
}
