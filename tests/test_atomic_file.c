/* Output files: a regular file is replaced whole or not at all (a failed write, ENOSPC from a
 * file-size limit included, leaves the old one and no temporary); a symlink stays a link and its
 * target is replaced; a character device is written in place, never turned into a regular file
 * (/dev/null takes the bytes, /dev/full's ENOSPC is an error); a directory is refused; the
 * temporaries of a killed writer are removed by the next write. */
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "test_util.h"

static char dir[1024];

static const char *in_dir(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "%s/%s", dir, name);
    return buf;
}

static brg_status write_text(const char *path, const char *text) {
    brg_atomic_file f;
    BRG_TRY(brg_atomic_file_open(path, &f));
    BRG_TRY(brg_atomic_file_write(&f, text, strlen(text)));
    return brg_atomic_file_commit(&f);
}

/* The whole file (at most 255 bytes); "" when it cannot be read. */
static const char *read_text(const char *path) {
    static char buf[256];
    buf[0] = '\0';
    FILE *fp = fopen(path, "rb");
    if (!fp) return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

static bool is_char_device(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISCHR(st.st_mode);
}

static void test_regular_and_symlink(void) {
    char file[1100], link[1100], dangling[1100], target[1100];
    in_dir(file, sizeof file, "plain.txt");
    CHECK_OK(write_text(file, "one"));
    CHECK_OK(write_text(file, "two"));
    CHECK(strcmp(read_text(file), "two") == 0);

    in_dir(link, sizeof link, "link.txt");
    unlink(link);
    CHECK(symlink("plain.txt", link) == 0);
    CHECK_OK(write_text(link, "three"));
    struct stat st;
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode)); /* still a link */
    CHECK(strcmp(read_text(file), "three") == 0);        /* its target replaced */

    /* A dangling link: the file it names is created. */
    in_dir(dangling, sizeof dangling, "dangling.txt");
    in_dir(target, sizeof target, "made-by-link.txt");
    unlink(dangling), unlink(target);
    CHECK(symlink("made-by-link.txt", dangling) == 0);
    CHECK_OK(write_text(dangling, "four"));
    CHECK(lstat(dangling, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(strcmp(read_text(target), "four") == 0);
}

static void test_devices_and_directories(void) {
    CHECK_OK(write_text("/dev/null", "discarded"));
    CHECK(is_char_device("/dev/null"));
    if (access("/dev/full", W_OK) == 0) {
        char big[1 << 16];
        memset(big, 'x', sizeof big);
        brg_atomic_file f;
        CHECK_OK(brg_atomic_file_open("/dev/full", &f));
        brg_status s = brg_atomic_file_write(&f, big, sizeof big);
        if (s == BRG_OK) s = brg_atomic_file_commit(&f);
        CHECK_MSG(s == BRG_ERR_IO && strstr(brg_last_error(), "/dev/full"), "writing /dev/full: %s",
                  brg_last_error());
        CHECK_MSG(is_char_device("/dev/full"), "/dev/full is no longer a device");
    }
    char sub[1100];
    in_dir(sub, sizeof sub, "a-folder");
    mkdir(sub, 0777);
    CHECK_ERR(write_text(sub, "x"), BRG_ERR_IO, "is a directory");
    struct stat st;
    CHECK(stat(sub, &st) == 0 && S_ISDIR(st.st_mode));
}

/* A temporary named after a process that has exited goes; one of a live process stays. */
static void test_stale_temporaries(void) {
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    char file[1100], stale[1200], live[1200];
    in_dir(file, sizeof file, "state.json");
    snprintf(stale, sizeof stale, "%s.tmp.%ld", file, (long)child);
    snprintf(live, sizeof live, "%s.tmp.%ld", file, (long)getppid());
    FILE *a = fopen(stale, "w"), *b = fopen(live, "w");
    CHECK(a && b);
    if (a) fclose(a);
    if (b) fclose(b);
    CHECK_OK(write_text(file, "{}"));
    CHECK_MSG(access(stale, F_OK) != 0, "the temporary of an exited writer was left");
    CHECK_MSG(access(live, F_OK) == 0, "the temporary of a live process was removed");
    unlink(live);
}

/* Past RLIMIT_FSIZE a write fails with EFBIG (SIGXFSZ ignored), as on a full disk: the old file
 * stays whole and no temporary is left. Run in a child so the limit ends with it. */
static void test_file_size_limit(void) {
    char file[1100], tmp[1200];
    in_dir(file, sizeof file, "limited.bin");
    CHECK_OK(write_text(file, "old contents"));
    pid_t child = fork();
    if (child == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {4096, 4096};
        setrlimit(RLIMIT_FSIZE, &lim);
        static char big[1 << 16];
        brg_atomic_file f;
        brg_status s = brg_atomic_file_open(file, &f);
        if (s == BRG_OK) s = brg_atomic_file_write(&f, big, sizeof big);
        if (s == BRG_OK) s = brg_atomic_file_commit(&f);
        _exit(s == BRG_ERR_IO ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the write past the size limit did not fail cleanly");
    CHECK(strcmp(read_text(file), "old contents") == 0);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", file, (long)child);
    CHECK_MSG(access(tmp, F_OK) != 0, "a temporary was left behind");
}

int main(void) {
    snprintf(dir, sizeof dir, "%s/atomic", test_tmp_dir());
    mkdir(dir, 0777);
    test_regular_and_symlink();
    test_devices_and_directories();
    test_stale_temporaries();
    test_file_size_limit();
    return test_finish();
}
