// inboxlog C++17 wrapper: header-only RAII over the C ABI in inboxlog.h (hand-written).
//
// Handles are move-only and released by their destructors; every failed call throws
// inboxlog::Error carrying the status code, the kind name and the message. Structured
// values stay JSON text (std::string), exactly as in the C ABI. A moved-from handle
// throws Error with INBOXLOG_STATUS_NULL_ARGUMENT when used. Thread-safety is the C
// ABI's: a Session may be shared by reference across threads (not destroyed while in
// use).
#ifndef INBOXLOG_HPP
#define INBOXLOG_HPP

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "inboxlog.h"

namespace inboxlog {

/// A failed call: `code()` is an inboxlog_status value, `kind()` its name.
class Error : public std::runtime_error {
public:
    Error(int code, std::string kind, const std::string &message)
        : std::runtime_error(message), code_(code), kind_(std::move(kind)) {}
    int code() const noexcept { return code_; }
    const std::string &kind() const noexcept { return kind_; }

private:
    int code_;
    std::string kind_;
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

/// The decoded string value of `"key":"…"` in the library's compact error JSON. Never
/// throws on malformed input (a bad or truncated `\u` escape, a lone surrogate becomes
/// U+FFFD), so a parse can never hide the error being reported.
inline std::string string_field(const std::string &json, const std::string &key) {
    const std::string marker = "\"" + key + "\":\"";
    std::size_t i = json.find(marker);
    std::string out;
    if (i == std::string::npos) return out;
    for (i += marker.size(); i < json.size() && json[i] != '"'; ++i) {
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
    return Error(status, kind, string_field(json, "message"));
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
    explicit Session(inboxlog_session *raw) noexcept : h_(raw) {}

    std::string id() const { return detail::str(inboxlog_session_id, h_.get()); }
    std::string header() const { return detail::str(inboxlog_session_header, h_.get()); }
    std::string open_report() const { return detail::str(inboxlog_session_open_report, h_.get()); }
    /// INBOXLOG_ABSENT for an empty log.
    std::int64_t last_seq() const { return detail::value<std::int64_t>(inboxlog_session_last_seq, h_.get()); }
    /// INBOXLOG_ABSENT when no turn is open.
    std::int64_t current_turn() const {
        return detail::value<std::int64_t>(inboxlog_session_current_turn, h_.get());
    }
    std::string events(std::uint64_t since = 0) const {
        return detail::str(inboxlog_session_events, h_.get(), since);
    }
    /// Appends a host event; returns it as JSON. An empty envelope means none.
    std::string append(const std::string &type, const std::string &data, const std::string &envelope = {}) {
        return detail::str(inboxlog_session_append, h_.get(), type.c_str(), data.c_str(),
                           detail::opt(envelope));
    }
    void flush() { detail::call(inboxlog_session_flush, h_.get()); }
    void close() { detail::call(inboxlog_session_close, h_.get()); }
    void watch() { detail::call(inboxlog_session_watch, h_.get()); }
    /// Notifications since the last poll: [{"event":…},{"inbox":…},…].
    std::string poll() { return detail::str(inboxlog_session_poll, h_.get()); }
    /// The inbox as of seq `upto` (INBOXLOG_ABSENT: now; past the last seq: an Error):
    /// {"seq":…,"next_turn":[…],"next_step":[…]}.
    std::string baseline(std::int64_t upto = INBOXLOG_ABSENT) const {
        return detail::str(inboxlog_session_baseline, h_.get(), upto);
    }

    // Inbox (ARCHITECTURE.md#inbox).
    std::string splice(const std::string &target, double start, double delete_count,
                       const std::string &inserted) {
        return detail::str(inboxlog_inbox_splice, h_.get(), target.c_str(), start, delete_count,
                           inserted.c_str());
    }
    void inbox_append(const std::string &target, const std::string &message) {
        detail::call(inboxlog_inbox_append, h_.get(), target.c_str(), message.c_str());
    }
    void inbox_prepend(const std::string &target, const std::string &message) {
        detail::call(inboxlog_inbox_prepend, h_.get(), target.c_str(), message.c_str());
    }
    bool replace(const std::string &id, const std::string &message) {
        return detail::value<bool>(inboxlog_inbox_replace, h_.get(), id.c_str(), message.c_str());
    }
    bool remove(const std::string &id) { return detail::value<bool>(inboxlog_inbox_remove, h_.get(), id.c_str()); }
    void clear() { detail::call(inboxlog_inbox_clear, h_.get()); }
    std::string next_turn() const { return detail::str(inboxlog_inbox_next_turn, h_.get()); }
    std::string next_step() const { return detail::str(inboxlog_inbox_next_step, h_.get()); }
    bool has_pending() const { return detail::value<bool>(inboxlog_inbox_has_pending, h_.get()); }

    // Step-boundary protocol (ARCHITECTURE.md#protocol). `extra` is a JSON object of host keys for the
    // event the call writes (empty: none), e.g. open_turn(R"({"trigger":{"kind":"user"}})").
    std::uint64_t open_turn(const std::string &extra = {}) {
        return detail::value<std::uint64_t>(inboxlog_session_open_turn, h_.get(), detail::opt(extra));
    }
    std::string propose_step() { return detail::str(inboxlog_session_propose_step, h_.get()); }
    std::string decide(const std::string &decision, const std::string &extra = {}) {
        return detail::str(inboxlog_session_decide, h_.get(), decision.c_str(), detail::opt(extra));
    }
    /// Whether another step must be proposed.
    bool end_step(const std::string &outcome, const std::string &extra = {}) {
        return detail::value<bool>(inboxlog_session_end_step, h_.get(), outcome.c_str(), detail::opt(extra));
    }
    std::string close_turn(const std::string &extra = {}) {
        return detail::str(inboxlog_session_close_turn, h_.get(), detail::opt(extra));
    }
    /// An empty cause means {"kind":"user"}.
    void cancel(const std::string &cause = {}, bool keep_inbox = false, const std::string &extra = {}) {
        detail::call(inboxlog_session_cancel, h_.get(), detail::opt(cause), keep_inbox, detail::opt(extra));
    }
    void fail(const std::string &error, const std::string &extra = {}) {
        detail::call(inboxlog_session_fail, h_.get(), error.c_str(), detail::opt(extra));
    }

    inboxlog_session *get() const noexcept { return h_.get(); }

private:
    detail::Handle<inboxlog_session, inboxlog_session_free> h_;
};

/// A place that holds session logs.
class Store {
public:
    static Store memory() { return Store(detail::value<inboxlog_store *>(inboxlog_store_new_memory)); }
    /// durability: "sync", "batched" or "none".
    static Store jsonl(const std::string &root, const std::string &durability = "sync") {
        return Store(detail::value<inboxlog_store *>(inboxlog_store_open_jsonl, root.c_str(), durability.c_str()));
    }

    /// An empty meta means none.
    Session create(const std::string &id, const std::string &meta = {}) const {
        return Session(
            detail::value<inboxlog_session *>(inboxlog_session_create, h_.get(), id.c_str(), detail::opt(meta)));
    }
    /// seed_length INBOXLOG_ABSENT: none.
    Session create_seeded(const std::string &id, const std::string &seed, std::int64_t seed_length = INBOXLOG_ABSENT,
                          const std::string &meta = {}) const {
        return Session(detail::value<inboxlog_session *>(inboxlog_session_create_seeded, h_.get(), id.c_str(),
                                                         detail::opt(meta), seed.c_str(), seed_length));
    }
    Session open(const std::string &id) const {
        return Session(detail::value<inboxlog_session *>(inboxlog_session_open, h_.get(), id.c_str()));
    }
    Session fork(const std::string &parent, const std::string &child, const std::string &meta = {}) const {
        return Session(detail::value<inboxlog_session *>(inboxlog_session_fork, h_.get(), parent.c_str(),
                                                         child.c_str(), detail::opt(meta)));
    }
    /// {"header":{…},"events":[…]}
    std::string inspect(const std::string &id) const {
        return detail::str(inboxlog_store_inspect, h_.get(), id.c_str());
    }
    std::string list() const { return detail::str(inboxlog_store_list, h_.get()); }
    /// Deletes session `id` for good (`delete` is a C++ keyword).
    void remove(const std::string &id) const { detail::call(inboxlog_store_delete, h_.get(), id.c_str()); }

private:
    explicit Store(inboxlog_store *raw) noexcept : h_(raw) {}
    detail::Handle<inboxlog_store, inboxlog_store_free> h_;
};

/// A consumer's copy of an inbox that follows splice events.
class Projection {
public:
    explicit Projection(const std::string &baseline)
        : h_(detail::value<inboxlog_projection *>(inboxlog_projection_new, baseline.c_str())) {}
    static Projection replay(const std::string &events, std::uint64_t replay_from = 0,
                             std::int64_t upto = INBOXLOG_ABSENT) {
        return Projection(
            detail::value<inboxlog_projection *>(inboxlog_projection_replay, events.c_str(), replay_from, upto));
    }
    void apply(const std::string &event) { detail::call(inboxlog_projection_apply, h_.get(), event.c_str()); }
    void apply_all(const std::string &events) {
        detail::call(inboxlog_projection_apply_all, h_.get(), events.c_str());
    }
    std::string baseline() const { return detail::str(inboxlog_projection_baseline, h_.get()); }

private:
    explicit Projection(inboxlog_projection *raw) noexcept : h_(raw) {}
    detail::Handle<inboxlog_projection, inboxlog_projection_free> h_;
};

} // namespace inboxlog

#endif // INBOXLOG_HPP
