/* Test helpers for the C hosts: every mismatch prints where and exits non-zero. */
#ifndef INBOXLOG_TEST_CHECK_H
#define INBOXLOG_TEST_CHECK_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inboxlog.h"

/* The test hook of a library built with the ffi crate's testing feature (make test-c
 * builds it so for the hosts); the shipped library and include/inboxlog.h have none. */
int inboxlog_test_panic(char **error);

#define FAIL(...)                                                          \
    do {                                                                   \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                    \
        fprintf(stderr, __VA_ARGS__);                                      \
        fputc('\n', stderr);                                               \
        exit(1);                                                           \
    } while (0)

/* Runs a call whose last argument is `&err`; fails the test unless it returns OK. */
#define OK(call)                                                           \
    do {                                                                   \
        char *err = NULL;                                                  \
        int status_ = (call);                                              \
        if (status_ != INBOXLOG_STATUS_OK) {                               \
            FAIL("%s returned %d: %s", #call, status_, err ? err : "?");   \
        }                                                                  \
        if (err != NULL) FAIL("%s wrote an error on success", #call);      \
    } while (0)

/* Runs a call whose last argument is `&err`; fails the test unless it returns `want`
 * with an error JSON of that code whose text contains `needle`. */
#define EXPECT_STATUS(want, needle, call)                                  \
    do {                                                                   \
        char *err = NULL;                                                  \
        int status_ = (call);                                              \
        char code_[32];                                                    \
        if (status_ != (want)) {                                           \
            FAIL("%s returned %d, want %d: %s", #call, status_, (int)(want), \
                 err ? err : "(no error)");                                \
        }                                                                  \
        if (err == NULL) FAIL("%s wrote no error JSON", #call);            \
        snprintf(code_, sizeof code_, "{\"code\":%d,", (int)(want));       \
        if (strncmp(err, code_, strlen(code_)) != 0 || !strstr(err, (needle))) { \
            FAIL("%s: error %s lacks %s / %s", #call, err, code_, (needle)); \
        }                                                                  \
        inboxlog_string_free(err);                                         \
    } while (0)

#define EXPECT_STR(got, want)                                              \
    do {                                                                   \
        if (strcmp((got), (want)) != 0) {                                  \
            FAIL("got  %s\nwant %s", (got), (want));                       \
        }                                                                  \
    } while (0)

#define EXPECT_CONTAINS(got, needle)                                       \
    do {                                                                   \
        if (strstr((got), (needle)) == NULL) {                             \
            FAIL("%s\ndoes not contain %s", (got), (needle));              \
        }                                                                  \
    } while (0)

#define EXPECT_PREFIX(got, prefix)                                         \
    do {                                                                   \
        if (strncmp((got), (prefix), strlen(prefix)) != 0) {               \
            FAIL("%s\ndoes not start with %s", (got), (prefix));           \
        }                                                                  \
    } while (0)

#define EXPECT(cond)                                                       \
    do {                                                                   \
        if (!(cond)) FAIL("expected %s", #cond);                           \
    } while (0)

/* How many times `needle` occurs in `haystack`. */
static inline int count_of(const char *haystack, const char *needle) {
    int n = 0;
    for (const char *p = strstr(haystack, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* Removes a flat temporary directory and the files in it. */
static inline void remove_dir(const char *path) {
    DIR *dir = opendir(path);
    struct dirent *entry;
    char file[4096];
    if (dir == NULL) return;
    while ((entry = readdir(dir)) != NULL) {
        if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
        snprintf(file, sizeof file, "%s/%s", path, entry->d_name);
        unlink(file);
    }
    closedir(dir);
    rmdir(path);
}

#endif
