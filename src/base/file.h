/* base/file.h - reading a whole file that a user named (a plan, a body, a data file). */
#ifndef SQ_BASE_FILE_H
#define SQ_BASE_FILE_H

#include <stddef.h>

#include "base/err.h"

/* Reads the file at path into a new malloc'd buffer (*out, *len bytes, then a NUL the length
 * does not count; the caller frees *out). Returns 0; -EISDIR for a directory (fopen and read
 * would say "Is a directory" or, through stdio, "Input/output error"); -SQ_ETOOBIG when it holds
 * more than max bytes (a regular file is refused by its size, before any read); or another
 * -errno from open or read. *out is untouched on error. */
SQ_MUST_CHECK int sq_file_read(const char *path, size_t max, char **out, size_t *len);

#endif
