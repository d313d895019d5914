/* base/file.c - see file.h. */
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int sq_file_read(const char *path, size_t max, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return -EISDIR;
    }
    if (max > SIZE_MAX - 2)
        max = SIZE_MAX - 2;
    size_t cap = 65536;
    if (S_ISREG(st.st_mode)) {
        if ((unsigned long long)st.st_size > max) {
            close(fd);
            return -SQ_ETOOBIG;
        }
        cap = (size_t)st.st_size + 2; /* the bytes, a NUL, and room to read the end of file */
    }
    char *buf = NULL;
    size_t n = 0;
    int rc = 0;
    for (;;) {
        if (!buf || cap - n < 2) { /* room for one more byte and the NUL */
            size_t ncap = !buf ? cap : cap > (max + 2) / 2 ? max + 2 : cap * 2;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                rc = -ENOMEM;
                break;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t k = read(fd, buf + n, cap - n - 1);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            break;
        }
        if (k == 0)
            break;
        n += (size_t)k;
        if (n > max) { /* a pipe, or a file that grew: cap is at most max + 2 */
            rc = -SQ_ETOOBIG;
            break;
        }
    }
    close(fd);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}
