// inboxlog C++17 wrapper: header-only RAII over the C ABI in inboxlog.h (hand-written).
//
// Handles are move-only and released by their destructors; every failed call throws
// inboxlog::Error carrying the status code, the kind name, the message and where it
// happened (session, path, line, offset, seq) when the library says. Structured
// values stay JSON text (std::string), exactly as in the C ABI; a follower's poll comes
// split into its events. Every function of inboxlog.h has its wrapper here
// (tests/hpp_coverage.py checks it). A moved-from handle throws Error with
// INBOXLOG_STATUS_NULL_ARGUMENT when used. Thread-safety is the C
// ABI's: a Session may be shared by reference across threads (not destroyed while in
// use).
#ifndef INBOXLOG_HPP
#define INBOXLOG_HPP

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "inboxlog.h"

namespace inboxlog {

namespace detail {
// The error JSON's readers, defined below.
inline std::size_t field_at(const std::string &json, const std::string &key) noexcept;
inline std::string string_field(const std::string &json, const std::string &key);
inline std::optional<std::uint64_t> uint_field(const std::string &json, const std::string &key) noexcept;
} // namespace detail

/// A failed call: `code()` is an inboxlog_status value, `kind()` its name, `what()` the
/// message; where the library knows it, the error names the session, the file (`path`),
/// its `line` and byte `offset`, and the `seq` it happened at.
class Error : public std::runtime_error {
public:
    /// An error with no location.
    Error(int code, std::string kind, const std::string &message)
        : std::runtime_error(message), code_(code), kind_(std::move(kind)) {}
    /// An error with the location keys of the library's error JSON `json` (absent keys,
    /// or keys of the wrong type, stay empty).
    Error(int code, std::string kind, const std::string &message, std::string json)
        : std::runtime_error(message), code_(code), kind_(std::move(kind)), json_(std::move(json)) {
        if (json_.empty()) return;
        if (detail::field_at(json_, "session") != std::string::npos) session_ = detail::string_field(json_, "session");
        if (detail::field_at(json_, "path") != std::string::npos) path_ = detail::string_field(json_, "path");
        line_ = detail::uint_field(json_, "line");
        offset_ = detail::uint_field(json_, "offset");
        seq_ = detail::uint_field(json_, "seq");
    }
    /// The inboxlog_status code.
    int code() const noexcept { return code_; }
    /// The kind name, e.g. "corrupt".
    const std::string &kind() const noexcept { return kind_; }
    /// The session id the error names.
    const std::optional<std::string> &session() const noexcept { return session_; }
    /// The file the error names (a JSONL log).
    const std::optional<std::string> &path() const noexcept { return path_; }
    /// The line of that file, counting from 1.
    std::optional<std::uint64_t> line() const noexcept { return line_; }
    /// The byte offset of that line in the file.
    std::optional<std::uint64_t> offset() const noexcept { return offset_; }
    /// The seq of the event the error names.
    std::optional<std::uint64_t> seq() const noexcept { return seq_; }
    /// The library's error JSON as returned ("" for an error made by the wrapper).
    const std::string &json() const noexcept { return json_; }

private:
    int code_;
    std::string kind_;
    std::string json_;
    std::optional<std::string> session_;
    std::optional<std::string> path_;
    std::optional<std::uint64_t> line_;
    std::optional<std::uint64_t> offset_;
    std::optional<std::uint64_t> seq_;
};

namespace detail {

/// Copies a library string and frees it.
inline std::string take(char *s) {
    std::string out = s != nullptr ? s : "";
    inboxlog_string_free(s);
    return out;
}

/// Appends code point `cp` to `out` as UTF-8.
inline void put_utf8(std::string &out, unsigned cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

/// The code unit of the four hex digits at `json[at..at+4]`, without throwing: false
/// when they are missing or not hex.
inline bool hex4(const std::string &json, std::size_t at, unsigned &cp) noexcept {
    if (at > json.size() || json.size() - at < 4) return false;
    cp = 0;
    for (std::size_t k = at; k < at + 4; ++k) {
        const char c = json[k];
        unsigned digit;
        if (c >= '0' && c <= '9') digit = static_cast<unsigned>(c - '0');
        else if (c >= 'a' && c <= 'f') digit = static_cast<unsigned>(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') digit = static_cast<unsigned>(c - 'A' + 10);
        else return false;
        cp = cp * 16 + digit;
    }
    return true;
}

/// Moves `i` past the JSON string that starts at `json[i]` (a quote); false when it
/// does not end.
inline bool skip_string(const std::string &json, std::size_t &i) noexcept {
    for (++i; i < json.size(); ++i) {
        if (json[i] == '\\') {
            ++i;
        } else if (json[i] == '"') {
            ++i;
            return true;
        }
    }
    return false;
}

/// Where the value of the top-level key `key` of the JSON object `json` starts, or npos.
/// Walks the object key by key, skipping values whole, so a key spelled inside a string
/// (a message quoting `"seq":`) is never taken for one. Never throws; on malformed input
/// it finds what comes before the damage.
inline std::size_t field_at(const std::string &json, const std::string &key) noexcept {
    const std::size_t n = json.size();
    std::size_t i = 0;
    auto blank = [&] {
        while (i < n && (json[i] == ' ' || json[i] == '\n' || json[i] == '\t' || json[i] == '\r')) ++i;
    };
    blank();
    if (i >= n || json[i] != '{') return std::string::npos;
    ++i;
    for (;;) {
        blank();
        if (i >= n || json[i] != '"') return std::string::npos;
        const std::size_t name = i + 1;
        if (!skip_string(json, i)) return std::string::npos;
        const bool match = i - 1 - name == key.size() && json.compare(name, key.size(), key) == 0;
        blank();
        if (i >= n || json[i] != ':') return std::string::npos;
        ++i;
        blank();
        if (match) return i < n ? i : std::string::npos;
        int depth = 0;
        while (i < n) {
            const char c = json[i];
            if (c == '"') {
                if (!skip_string(json, i)) return std::string::npos;
                continue;
            }
            if (c == '{' || c == '[') {
                ++depth;
            } else if (c == '}' || c == ']') {
                if (depth == 0) break;
                --depth;
            } else if (c == ',' && depth == 0) {
                break;
            }
            ++i;
        }
        if (i >= n || json[i] != ',') return std::string::npos;
        ++i;
    }
}

/// The unsigned integer value of the top-level key `key`, if it is one that fits.
inline std::optional<std::uint64_t> uint_field(const std::string &json, const std::string &key) noexcept {
    std::size_t i = field_at(json, key);
    if (i == std::string::npos || i >= json.size() || json[i] < '0' || json[i] > '9') return std::nullopt;
    std::uint64_t value = 0;
    for (; i < json.size() && json[i] >= '0' && json[i] <= '9'; ++i) {
        const auto digit = static_cast<std::uint64_t>(json[i] - '0');
        if (value > (UINT64_MAX - digit) / 10) return std::nullopt;
        value = value * 10 + digit;
    }
    if (i < json.size() && (json[i] == '.' || json[i] == 'e' || json[i] == 'E')) return std::nullopt;
    return value;
}

/// The decoded string value of the top-level key `key` in the library's compact error
/// JSON ("" when absent or not a string). Never throws on malformed input (a bad or
/// truncated `\u` escape, a lone surrogate becomes U+FFFD), so a parse can never hide
/// the error being reported.
inline std::string string_field(const std::string &json, const std::string &key) {
    std::size_t i = field_at(json, key);
    std::string out;
    if (i == std::string::npos || json[i] != '"') return out;
    for (++i; i < json.size() && json[i] != '"'; ++i) {
        if (json[i] != '\\' || i + 1 >= json.size()) {
            out += json[i];
            continue;
        }
        char c = json[++i];
        switch (c) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
            constexpr unsigned replacement = 0xFFFD;
            unsigned cp = 0;
            if (!hex4(json, i + 1, cp)) {
                put_utf8(out, replacement); // the text after `\u` is kept as it is
                break;
            }
            i += 4;
            unsigned low = 0;
            if (cp >= 0xD800 && cp < 0xDC00 && i + 2 < json.size() && json[i + 1] == '\\' &&
                json[i + 2] == 'u' && hex4(json, i + 3, low) && low >= 0xDC00 && low < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                i += 6;
            } else if (cp >= 0xD800 && cp < 0xE000) {
                cp = replacement; // a lone surrogate
            }
            put_utf8(out, cp);
            break;
        }
        default: out += c; // '"', '\\', '/'
        }
    }
    return out;
}

/// The Error for a failed call with status `status` and error JSON `json` (which may be
/// empty or malformed: the status is always kept).
inline Error error_from(int status, const std::string &json) {
    const char *name = inboxlog_status_name(status);
    std::string kind = string_field(json, "kind");
    if (kind.empty() && name != nullptr) kind = name;
    return Error(status, kind, string_field(json, "message"), json);
}

/// Throws Error unless `status` is OK; frees the error JSON.
inline void check(int status, char *error) {
    if (status == INBOXLOG_STATUS_OK) return;
    const std::string json = take(error);
    throw error_from(status, json);
}

/// NULL for an empty optional argument.
inline const char *opt(const std::string &s) { return s.empty() ? nullptr : s.c_str(); }

/// Calls `f(args..., &out, &error)` and returns the string written to `out`.
template <class F, class... Args> std::string str(F f, Args... args) {
    char *out = nullptr;
    char *error = nullptr;
    const int status = f(args..., &out, &error); // before `error` is read
    check(status, error);
    return take(out);
}

/// Calls `f(args..., &error)`.
template <class F, class... Args> void call(F f, Args... args) {
    char *error = nullptr;
    const int status = f(args..., &error);
    check(status, error);
}

/// Calls `f(args..., &out, &error)` and returns `out`.
template <class T, class F, class... Args> T value(F f, Args... args) {
    T out{};
    char *error = nullptr;
    const int status = f(args..., &out, &error);
    check(status, error);
    return out;
}

/// A move-only owner of a C handle released with `Free`.
template <class T, void (*Free)(T *)> class Handle {
public:
    explicit Handle(T *raw = nullptr) noexcept : raw_(raw) {}
    Handle(Handle &&other) noexcept : raw_(std::exchange(other.raw_, nullptr)) {}
    Handle &operator=(Handle &&other) noexcept {
        if (this != &other) Free(std::exchange(raw_, std::exchange(other.raw_, nullptr)));
        return *this;
    }
    Handle(const Handle &) = delete;
    Handle &operator=(const Handle &) = delete;
    ~Handle() { Free(raw_); }
    T *get() const noexcept { return raw_; }

private:
    T *raw_;
};

} // namespace detail

/// The library version, e.g. "0.1.0".
inline std::string version() { return inboxlog_version(); }

/// The consumed-work fold of a JSON array of events: {"end":…|null,"droppedUnrun":bool}.
inline std::string fold_consumed_work(const std::string &events) {
    return detail::str(inboxlog_fold_consumed_work, events.c_str());
}

/// One open session (see inboxlog_session in inboxlog.h).
class Session {
public:
    /// Takes ownership of `raw` (NULL: a handle every call refuses).
    explicit Session(inboxlog_session *raw) noexcept : h_(raw) {}

    /// The session id.
    std::string id() const { return detail::str(inboxlog_session_id, h_.get()); }
    /// The header, a JSON object.
    std::string header() const { return detail::str(inboxlog_session_header, h_.get()); }
    /// What opening repaired: {"tornBytes":N,"repairedTurn":N|null,"repairedCompaction":S|null}.
    std::string open_report() const { return detail::str(inboxlog_session_open_report, h_.get()); }
    /// INBOXLOG_ABSENT for an empty log.
    std::int64_t last_seq() const { return detail::value<std::int64_t>(inboxlog_session_last_seq, h_.get()); }
    /// INBOXLOG_ABSENT when no turn is open.
    std::int64_t current_turn() const {
        return detail::value<std::int64_t>(inboxlog_session_current_turn, h_.get());
    }
    /// The events with seq >= `since`, a JSON array.
    std::string events(std::uint64_t since = 0) const {
        return detail::str(inboxlog_session_events, h_.get(), since);
    }
    /// What the model sees: {"nodes":[seq...],"messages":[message...]}.
    std::string surface() const { return detail::str(inboxlog_session_surface, h_.get()); }
    /// Appends a host event; returns it as JSON. An empty envelope means none.
    std::string append(const std::string &type, const std::string &data, const std::string &envelope = {}) {
        return detail::str(inboxlog_session_append, h_.get(), type.c_str(), data.c_str(),
                           detail::opt(envelope));
    }
    /// Makes everything before it durable (the barrier of "batched" and "none").
    void flush() { detail::call(inboxlog_session_flush, h_.get()); }
    /// Releases the log; later calls throw CLOSED (closing twice is fine).
    void close() { detail::call(inboxlog_session_close, h_.get()); }
    /// Starts collecting notifications for poll().
    void watch() { detail::call(inboxlog_session_watch, h_.get()); }
    /// Notifications since the last poll: [{"event":…},{"inbox":…},…].
    std::string poll() { return detail::str(inboxlog_session_poll, h_.get()); }
    /// The observer failures since the last call, oldest first, as a JSON array of
    /// strings ("[]" when none); readable after close() too.
    std::string take_observer_failures() {
        return detail::str(inboxlog_session_take_observer_failures, h_.get());
    }
    /// The inbox as of seq `upto` (INBOXLOG_ABSENT: now; past the last seq: an Error):
    /// {"seq":…,"next_turn":[…],"next_step":[…]}.
    std::string baseline(std::int64_t upto = INBOXLOG_ABSENT) const {
        return detail::str(inboxlog_session_baseline, h_.get(), upto);
    }

    // Inbox (ARCHITECTURE.md#inbox).
    /// Splices `inserted` (a JSON array) into `target` with JavaScript arithmetic; returns the removed messages.
    std::string splice(const std::string &target, double start, double delete_count,
                       const std::string &inserted) {
        return detail::str(inboxlog_inbox_splice, h_.get(), target.c_str(), start, delete_count,
                           inserted.c_str());
    }
    /// Appends `message` to the end of `target`.
    void inbox_append(const std::string &target, const std::string &message) {
        detail::call(inboxlog_inbox_append, h_.get(), target.c_str(), message.c_str());
    }
    /// Puts `message` at the head of `target`.
    void inbox_prepend(const std::string &target, const std::string &message) {
        detail::call(inboxlog_inbox_prepend, h_.get(), target.c_str(), message.c_str());
    }
    /// Replaces the pending message `id`; false when none is pending.
    bool replace(const std::string &id, const std::string &message) {
        return detail::value<bool>(inboxlog_inbox_replace, h_.get(), id.c_str(), message.c_str());
    }
    /// Removes the pending message `id`; false when none is pending.
    bool remove(const std::string &id) { return detail::value<bool>(inboxlog_inbox_remove, h_.get(), id.c_str()); }
    /// Cancels everything pending (next-step first).
    void clear() { detail::call(inboxlog_inbox_clear, h_.get()); }
    /// The next-turn list, a JSON array.
    std::string next_turn() const { return detail::str(inboxlog_inbox_next_turn, h_.get()); }
    /// The next-step list, a JSON array.
    std::string next_step() const { return detail::str(inboxlog_inbox_next_step, h_.get()); }
    /// Whether either list holds a message.
    bool has_pending() const { return detail::value<bool>(inboxlog_inbox_has_pending, h_.get()); }
    /// Takes in the messages posted to this session (Store::post), each as one durable
    /// splice (or one agent/inbox/rejected event); returns how many posts it wrote. Runs
    /// on its own when the session opens and before each propose_step.
    std::uint64_t receive() { return detail::value<std::uint64_t>(inboxlog_inbox_receive, h_.get()); }

    // Step-boundary protocol (ARCHITECTURE.md#protocol). `extra` is a JSON object of host keys for the
    // event the call writes (empty: none), e.g. open_turn(R"({"trigger":{"kind":"user"}})").
    /// Opens a turn; returns its number.
    std::uint64_t open_turn(const std::string &extra = {}) {
        return detail::value<std::uint64_t>(inboxlog_session_open_turn, h_.get(), detail::opt(extra));
    }
    /// Claims the input of the next step: {"turn":N,"step":K,"messages":[…]}.
    std::string propose_step() { return detail::str(inboxlog_session_propose_step, h_.get()); }
    /// The one pre-step decision: {"kind":"reject"} or {"kind":"enter","messages":[…]}.
    std::string decide(const std::string &decision, const std::string &extra = {}) {
        return detail::str(inboxlog_session_decide, h_.get(), decision.c_str(), detail::opt(extra));
    }
    /// Whether another step must be proposed.
    bool end_step(const std::string &outcome, const std::string &extra = {}) {
        return detail::value<bool>(inboxlog_session_end_step, h_.get(), outcome.c_str(), detail::opt(extra));
    }
    /// Closes a concluded turn with its reason.
    std::string close_turn(const std::string &extra = {}) {
        return detail::str(inboxlog_session_close_turn, h_.get(), detail::opt(extra));
    }
    /// An empty cause means {"kind":"user"}.
    void cancel(const std::string &cause = {}, bool keep_inbox = false, const std::string &extra = {}) {
        detail::call(inboxlog_session_cancel, h_.get(), detail::opt(cause), keep_inbox, detail::opt(extra));
    }
    /// Ends the open turn as an error ({"message":…,"code":…}).
    void fail(const std::string &error, const std::string &extra = {}) {
        detail::call(inboxlog_session_fail, h_.get(), error.c_str(), detail::opt(extra));
    }

    /// Asks for a person's approval: {"id","toolName","callId"?,"arguments"?,"reason"?}.
    void ask_approval(const std::string &request) {
        detail::call(inboxlog_session_ask_approval, h_.get(), request.c_str());
    }
    /// Decides an approval: "allowed-once", "rejected", "cancelled" or "unavailable".
    void decide_approval(const std::string &approval_id, const std::string &outcome) {
        detail::call(inboxlog_session_decide_approval, h_.get(), approval_id.c_str(), outcome.c_str());
    }
    /// {"pending":[asked...],"parked":{"turn","approvals","ready"}|null}, after taking
    /// posted decisions in.
    std::string approvals() { return detail::str(inboxlog_session_approvals, h_.get()); }
    /// Parks the open turn on its pending approvals, with the host's state (JSON).
    void park(const std::string &state = {}) {
        detail::call(inboxlog_session_park, h_.get(), detail::opt(state));
    }
    /// Hands the parked run on: {"turn","parked":{...},"decisions":[{"id","outcome"}...]}.
    std::string resume_parked() { return detail::str(inboxlog_session_resume_parked, h_.get()); }

    /// Starts a compaction of the surface from seq `start` through seq `end`:
    /// {"compactionId","turn","range","shadowedSeqs","shadowedTokenCount","messages"}.
    std::string begin_compaction(std::uint64_t start, std::uint64_t end) {
        return detail::str(inboxlog_session_begin_compaction, h_.get(), start, end);
    }
    /// Commits the compaction this session started:
    /// {"summary":S|[block...],"provider","model","usage"?} -> {"compactionId","summary","message"}.
    std::string commit_compaction(const std::string &commit) {
        return detail::str(inboxlog_session_commit_compaction, h_.get(), commit.c_str());
    }
    /// Ends the compaction this session started with `error_text`.
    void abort_compaction(const std::string &error_text) {
        detail::call(inboxlog_session_abort_compaction, h_.get(), error_text.c_str());
    }
    /// Prunes a long tool/result: the new tool/result event, or "null" when it is short.
    std::string prune(std::uint64_t seq) { return detail::str(inboxlog_session_prune, h_.get(), seq); }

    /// The C handle, still owned by this Session.
    inboxlog_session *get() const noexcept { return h_.get(); }

private:
    detail::Handle<inboxlog_session, inboxlog_session_free> h_;
};

namespace detail {

/// The elements of the JSON array `json` as JSON texts, in order. Splits at the array's
/// own commas (strings and nested values are skipped whole); throws Error with
/// INBOXLOG_STATUS_INVALID_JSON when `json` is not one whole array.
inline std::vector<std::string> split_array(const std::string &json) {
    const auto bad = [&] {
        return Error(INBOXLOG_STATUS_INVALID_JSON, "invalid_json",
                     "inboxlog::Events: not a JSON array: " + json.substr(0, 64));
    };
    const auto blank = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
    std::vector<std::string> items;
    std::size_t i = 0;
    const std::size_t n = json.size();
    while (i < n && blank(json[i])) ++i;
    if (i >= n || json[i] != '[') throw bad();
    ++i;
    std::size_t start = i;
    int depth = 0;
    for (; i < n; ++i) {
        const char c = json[i];
        if (c == '"') {
            if (!skip_string(json, i)) throw bad();
            --i; // the loop steps past the closing quote
        } else if (c == '{' || c == '[') {
            ++depth;
        } else if ((c == '}' || c == ']') && depth > 0) {
            --depth;
        } else if ((c == ',' || c == ']') && depth == 0) {
            std::size_t b = start, e = i;
            while (b < e && blank(json[b])) ++b;
            while (e > b && blank(json[e - 1])) --e;
            if (b == e && (c == ',' || !items.empty())) throw bad(); // an empty element
            if (b < e) items.push_back(json.substr(b, e - b));
            start = i + 1;
            if (c == ']') break;
        } else if (c == '}') {
            throw bad();
        }
    }
    if (i >= n) throw bad(); // no closing bracket
    for (++i; i < n; ++i) {
        if (!blank(json[i])) throw bad();
    }
    return items;
}

} // namespace detail

/// A JSON array split into its elements, each a JSON text: the events one
/// Follower::poll returned, in seq order, or any array the library returns (a
/// proposal's messages, events()). Iterable.
class Events {
public:
    /// Splits `json`, a JSON array; Error (INBOXLOG_STATUS_INVALID_JSON) if it is none.
    explicit Events(std::string json) : json_(std::move(json)), items_(detail::split_array(json_)) {}
    /// The events as one JSON array, as the library returned them.
    const std::string &json() const noexcept { return json_; }
    /// How many events came.
    std::size_t size() const noexcept { return items_.size(); }
    /// Whether none came.
    bool empty() const noexcept { return items_.empty(); }
    /// The event at `i` (0 is the oldest).
    const std::string &operator[](std::size_t i) const { return items_.at(i); }
    /// The first event.
    std::vector<std::string>::const_iterator begin() const noexcept { return items_.begin(); }
    /// Past the last event.
    std::vector<std::string>::const_iterator end() const noexcept { return items_.end(); }

private:
    std::string json_;
    std::vector<std::string> items_;
};

/// Follows one session's log from elsewhere (Store::follow): its events as they are
/// committed, without owning the session. Calls on one follower serialize.
class Follower {
public:
    /// Waits up to `timeout` for committed events and returns every event available
    /// then, each once, in seq order (none when nothing came in time; zero does not
    /// wait). A negative timeout is refused with INBOXLOG_STATUS_INVALID_INPUT.
    Events poll(std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) const {
        if (timeout.count() < 0) {
            throw Error(INBOXLOG_STATUS_INVALID_INPUT, "invalid_input",
                        "follower poll: timeout is negative (" + std::to_string(timeout.count()) + " ms)");
        }
        return Events(detail::str(inboxlog_follower_poll, h_.get(), static_cast<std::uint64_t>(timeout.count())));
    }
    /// The seq of the next event poll returns: where a new follower resumes with nothing
    /// skipped or repeated.
    std::uint64_t next_seq() const { return detail::value<std::uint64_t>(inboxlog_follower_next_seq, h_.get()); }

private:
    friend class Store;
    explicit Follower(inboxlog_follower *raw) noexcept : h_(raw) {}
    detail::Handle<inboxlog_follower, inboxlog_follower_free> h_;
};

/// A place that holds session logs: memory, a JSONL directory or PostgreSQL.
class Store {
public:
    /// An empty in-memory store.
    static Store memory() { return Store(detail::value<inboxlog_store *>(inboxlog_store_new_memory)); }
    /// The JSONL directory store at `root`; durability: "sync", "batched" or "none".
    static Store jsonl(const std::string &root, const std::string &durability = "sync") {
        return Store(detail::value<inboxlog_store *>(inboxlog_store_open_jsonl, root.c_str(), durability.c_str()));
    }
    /// The store `url` names, through the one constructor for every backend: "memory:",
    /// a postgresql:// URL, or a JSONL directory path. `options` is a JSON object with
    /// optional "durability", "recordLimit", "schema" and "maxConnections" (the last two
    /// PostgreSQL only; empty: defaults); an option the store has no use for is
    /// INVALID_INPUT.
    static Store from_url(const std::string &url, const std::string &options = {}) {
        return Store(detail::value<inboxlog_store *>(inboxlog_store_open, url.c_str(), detail::opt(options)));
    }
    /// The PostgreSQL store at `url` (postgresql://, libpq syntax). `options` is a JSON
    /// object with optional "schema", "durability", "recordLimit" and "maxConnections"
    /// (the most connections the store holds, however many sessions are open; empty:
    /// defaults).
    static Store postgres(const std::string &url, const std::string &options = {}) {
        return Store(
            detail::value<inboxlog_store *>(inboxlog_store_open_postgres, url.c_str(), detail::opt(options)));
    }

    /// Creates the empty session `id`; `meta` a JSON object (empty: none).
    Session create(const std::string &id, const std::string &meta = {}) const {
        return Session(
            detail::value<inboxlog_session *>(inboxlog_session_create, h_.get(), id.c_str(), detail::opt(meta)));
    }
    /// Creates session `id` seeded with `seed` (a JSON array of events); seed_length
    /// INBOXLOG_ABSENT: none.
    Session create_seeded(const std::string &id, const std::string &seed, std::int64_t seed_length = INBOXLOG_ABSENT,
                          const std::string &meta = {}) const {
        return Session(detail::value<inboxlog_session *>(inboxlog_session_create_seeded, h_.get(), id.c_str(),
                                                         detail::opt(meta), seed.c_str(), seed_length));
    }
    /// Opens session `id` as its writer (LOCKED while another holds it).
    Session open(const std::string &id) const {
        return Session(detail::value<inboxlog_session *>(inboxlog_session_open, h_.get(), id.c_str()));
    }
    /// Opens session `id`; with `takeover`, takes it from a live but stuck owner
    /// (PostgreSQL only), who then gets FENCED on its next call.
    Session open(const std::string &id, bool takeover) const {
        return Session(detail::value<inboxlog_session *>(inboxlog_session_open_ex, h_.get(), id.c_str(), takeover));
    }
    /// Forks `parent` into the new session `child` (a copy of its events, an empty inbox).
    Session fork(const std::string &parent, const std::string &child, const std::string &meta = {}) const {
        return Session(detail::value<inboxlog_session *>(inboxlog_session_fork, h_.get(), parent.c_str(),
                                                         child.c_str(), detail::opt(meta)));
    }
    /// Reads session `id` without locking: {"header":{…},"events":[…]}.
    std::string inspect(const std::string &id) const {
        return detail::str(inboxlog_store_inspect, h_.get(), id.c_str());
    }
    /// The headers of every session, a JSON array.
    std::string list() const { return detail::str(inboxlog_store_list, h_.get()); }
    /// Checks session `id` as opening it would, without locking or writing: a JSON
    /// report on success, the Error opening would throw (with its path, line, offset
    /// and seq) otherwise.
    std::string verify(const std::string &id) const {
        return detail::str(inboxlog_store_verify, h_.get(), id.c_str());
    }
    /// What the model sees in session `id`, read without owning it:
    /// {"nodes":[seq...],"messages":[message...]}.
    std::string surface(const std::string &id) const {
        return detail::str(inboxlog_store_surface, h_.get(), id.c_str());
    }
    /// Moves the pending message `message_id` of session `id` to `index` of `target`
    /// (INBOXLOG_ABSENT: its end) from anywhere; returns the post id once durable.
    std::string move_pending(const std::string &id, const std::string &message_id, const std::string &target,
                             std::int64_t index = INBOXLOG_ABSENT) const {
        return detail::str(inboxlog_store_move_pending, h_.get(), id.c_str(), message_id.c_str(), target.c_str(),
                           index);
    }
    /// Decides approval `approval_id` of session `id` from anywhere, exactly once;
    /// returns the post id once the decision is durable.
    std::string decide(const std::string &id, const std::string &approval_id, const std::string &outcome) const {
        return detail::str(inboxlog_store_decide, h_.get(), id.c_str(), approval_id.c_str(), outcome.c_str());
    }
    /// Posts `message` (JSON) to the `target` list of session `id`, open or not,
    /// wherever its writer runs; returns the post id once the post is durable.
    std::string post(const std::string &id, const std::string &target, const std::string &message) const {
        return detail::str(inboxlog_store_post, h_.get(), id.c_str(), target.c_str(), message.c_str());
    }
    /// Removes the pending message `message_id` of session `id`, open or not, wherever
    /// its writer runs (applied once, in order with this handle's posts; a message no
    /// longer pending is left alone and the log records it rejected); returns the post
    /// id once the edit is durable.
    std::string remove_pending(const std::string &id, const std::string &message_id) const {
        return detail::str(inboxlog_store_remove_pending, h_.get(), id.c_str(), message_id.c_str());
    }
    /// Replaces the pending message `message_id` of session `id` with `message` (JSON),
    /// as remove_pending removes; returns the post id once the edit is durable.
    std::string replace_pending(const std::string &id, const std::string &message_id,
                                const std::string &message) const {
        return detail::str(inboxlog_store_replace_pending, h_.get(), id.c_str(), message_id.c_str(),
                           message.c_str());
    }
    /// Follows session `id` from seq `since`.
    Follower follow(const std::string &id, std::uint64_t since = 0) const {
        return Follower(detail::value<inboxlog_follower *>(inboxlog_follower_open, h_.get(), id.c_str(), since));
    }
    /// Deletes session `id` for good (`delete` is a C++ keyword).
    void remove(const std::string &id) const { detail::call(inboxlog_store_delete, h_.get(), id.c_str()); }

private:
    explicit Store(inboxlog_store *raw) noexcept : h_(raw) {}
    detail::Handle<inboxlog_store, inboxlog_store_free> h_;
};

/// A consumer's copy of an inbox that follows splice events.
class Projection {
public:
    /// A projection from a baseline {"seq":…,"next_turn":[…],"next_step":[…]}.
    explicit Projection(const std::string &baseline)
        : h_(detail::value<inboxlog_projection *>(inboxlog_projection_new, baseline.c_str())) {}
    /// A projection replayed from a log's events (splices from `replay_from`, up to `upto`).
    static Projection replay(const std::string &events, std::uint64_t replay_from = 0,
                             std::int64_t upto = INBOXLOG_ABSENT) {
        return Projection(
            detail::value<inboxlog_projection *>(inboxlog_projection_replay, events.c_str(), replay_from, upto));
    }
    /// Applies the next event.
    void apply(const std::string &event) { detail::call(inboxlog_projection_apply, h_.get(), event.c_str()); }
    /// Applies a JSON array of events, all or nothing.
    void apply_all(const std::string &events) {
        detail::call(inboxlog_projection_apply_all, h_.get(), events.c_str());
    }
    /// The projection as a baseline.
    std::string baseline() const { return detail::str(inboxlog_projection_baseline, h_.get()); }

private:
    explicit Projection(inboxlog_projection *raw) noexcept : h_(raw) {}
    detail::Handle<inboxlog_projection, inboxlog_projection_free> h_;
};

} // namespace inboxlog

#endif // INBOXLOG_HPP
