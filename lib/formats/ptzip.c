/* ptzip.c - the zip container of PyTorch checkpoints (see ptzip.h). */
#include "ptzip.h"
#include "../base/grow.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <minizip/unzip.h>
#include <zlib.h>

/* ---- minizip's I/O: pread on the fd, or the buffer ------------------- */

static voidpf io_open(voidpf opaque, const void *name, int mode)
{
	(void)opaque;
	/* read only: minizip's "open" is handed our struct as the name */
	return (mode & ZLIB_FILEFUNC_MODE_WRITE) ? NULL : (voidpf)name;
}

static uLong io_read(voidpf opaque, voidpf stream, void *buf, uLong size)
{
	struct ptzip_io *io = stream;
	uLong done = 0;

	(void)opaque;
	if (io->pos >= io->size)
		return 0;
	if (size > io->size - io->pos)
		size = (uLong)(io->size - io->pos);
	if (io->mem) {
		memcpy(buf, io->mem + io->pos, size);
		done = size;
	} else {
		while (done < size) {
			ssize_t got = pread(io->fd, (char *)buf + done, size - done,
					    (off_t)(io->pos + done));
			if (got < 0 && errno == EINTR)
				continue;
			if (got <= 0) {
				io->error = got < 0 ? errno : EIO;
				break;
			}
			done += (uLong)got;
		}
	}
	io->pos += done;
	return done;
}

static uLong io_write(voidpf opaque, voidpf stream, const void *buf, uLong size)
{
	(void)opaque, (void)stream, (void)buf, (void)size;
	return 0;
}

static ZPOS64_T io_tell(voidpf opaque, voidpf stream)
{
	(void)opaque;
	return ((struct ptzip_io *)stream)->pos;
}

static long io_seek(voidpf opaque, voidpf stream, ZPOS64_T offset, int origin)
{
	struct ptzip_io *io = stream;
	uint64_t base = origin == ZLIB_FILEFUNC_SEEK_SET ? 0 :
			origin == ZLIB_FILEFUNC_SEEK_CUR ? io->pos : io->size;

	(void)opaque;
	if (offset > UINT64_MAX - base || base + offset > io->size)
		return -1;
	io->pos = base + offset;
	return 0;
}

static int io_close(voidpf opaque, voidpf stream)
{
	(void)opaque, (void)stream;
	return 0;       /* the fd belongs to the caller */
}

static int io_error(voidpf opaque, voidpf stream)
{
	(void)opaque;
	return ((struct ptzip_io *)stream)->error;
}

/* ---- the archive ----------------------------------------------------- */

int ptzip_sniff(int fd, uint64_t size)
{
	unsigned char b[4];

	return size >= 4 && pread(fd, b, 4, 0) == 4 && !memcmp(b, "PK\3\4", 4);
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ptzip_entry *)a)->name, ((const struct ptzip_entry *)b)->name);
}

/* len bytes at off of the archive, or -1 (short: off the end, or an error) */
static int io_pread(struct ptzip_io *io, void *buf, size_t len, uint64_t off)
{
	uint64_t pos = io->pos;
	int ok = off <= io->size && len <= io->size - off;

	if (ok) {
		io->pos = off;
		ok = io_read(NULL, io, buf, (uLong)len) == len;
		io->pos = pos;
	}
	return ok ? 0 : -1;
}

static int zip_fail(struct ptzip *z, int code, struct sw_err *err, const char *what)
{
	if (z->io.error)
		return sw_fail(err, SW_EIO, "zip archive: %s: %s", what, strerror(z->io.error));
	return sw_fail(err, SW_EDATA, "zip archive: %s (minizip error %d)", what, code);
}

/*
 * The local header of the current entry (open), as the central directory
 * says it is: minizip checks its method, sizes, CRC and name length, not
 * its name or its flags. data is where its data starts, after the header's
 * 30 bytes, the name and the local extra field. The encryption and
 * data-descriptor flags must be the central directory's (torch sets the
 * data-descriptor flag in both), the name the same bytes.
 */
static int check_local_header(struct ptzip *z, const unz_file_info64 *fi, const char *name,
			      uint64_t data, struct sw_err *err)
{
	unsigned char h[30 + PTZIP_NAME_MAX];
	int extra = unzGetLocalExtrafield(z->unz, NULL, 0);
	size_t n = (size_t)fi->size_filename;
	uint64_t at;
	unsigned flags;

	if (extra < 0 || data < 30 + n + (uint64_t)extra)
		return sw_fail(err, SW_EDATA, "zip archive: %.100s: its local header is unreadable", name);
	at = data - 30 - n - (uint64_t)extra;
	if (io_pread(&z->io, h, 30 + n, at) < 0 || memcmp(h, "PK\3\4", 4))
		return sw_fail(err, z->io.error ? SW_EIO : SW_EDATA,
			       "zip archive: %.100s: its local header is missing", name);
	flags = (unsigned)(h[6] | h[7] << 8);
	if ((flags & 9) != (fi->flag & 9))
		return sw_fail(err, SW_EDATA, "zip archive: %.100s: its local header's flags (0x%x) "
			       "disagree with the central directory's (0x%lx): encryption or a data "
			       "descriptor said in one only", name, flags, (unsigned long)fi->flag);
	if (memcmp(h + 30, name, n))
		return sw_fail(err, SW_EDATA, "zip archive: %.100s: its local header names another "
			       "record", name);
	return SW_OK;
}

/* Record the current entry of the central directory in z->e[z->n]. */
static int take_entry(struct ptzip *z, size_t *cap, struct sw_err *err)
{
	char name[PTZIP_NAME_MAX];
	unz_file_info64 fi;
	unz64_file_pos pos;
	struct ptzip_entry *e;
	size_t toplen;
	int rc;

	if ((rc = unzGetCurrentFileInfo64(z->unz, &fi, name, sizeof name, NULL, 0, NULL, 0)) != UNZ_OK)
		return zip_fail(z, rc, err, "unreadable central directory");
	if (fi.size_filename >= sizeof name || strlen(name) != fi.size_filename)
		return sw_fail(err, SW_EDATA, "zip archive: a record's name is too long or holds a NUL byte");
	if (z->n == 0) {
		const char *slash = strchr(name, '/');
		if (!slash || slash == name)
			return sw_fail(err, SW_EDATA, "zip archive: record '%.100s' is not in a folder, "
				       "as torch.save writes every record", name);
		memcpy(z->top, name, (size_t)(slash - name));
		z->top[slash - name] = '\0';
	}
	toplen = strlen(z->top);
	if (strncmp(name, z->top, toplen) || name[toplen] != '/' || !name[toplen + 1])
		return sw_fail(err, SW_EDATA, "zip archive: record '%.100s' is not under '%s/', "
			       "where torch.save writes every record", name, z->top);
	if (fi.flag & 1)
		return sw_fail(err, SW_EDATA, "zip archive: %.100s is encrypted", name);
	if (fi.compression_method != 0 && fi.compression_method != Z_DEFLATED)
		return sw_fail(err, SW_EDATA, "zip archive: %.100s is compressed with method %lu "
			       "(only stored and deflated records are read)", name, fi.compression_method);
	if (fi.compression_method == 0 && fi.compressed_size != fi.uncompressed_size)
		return sw_fail(err, SW_EDATA, "zip archive: %.100s is stored but its sizes differ "
			       "(%llu and %llu bytes)", name, (unsigned long long)fi.compressed_size,
			       (unsigned long long)fi.uncompressed_size);
	if ((rc = unzGetFilePos64(z->unz, &pos)) != UNZ_OK)
		return zip_fail(z, rc, err, "unreadable central directory");
	/* the local header, checked against the central directory by minizip,
	 * says where the data starts */
	if ((rc = unzOpenCurrentFile(z->unz)) != UNZ_OK)
		return sw_fail(err, z->io.error ? SW_EIO : SW_EDATA,
			       "zip archive: %.100s: its local header is missing or disagrees with "
			       "the central directory", name);
	if (SW_GROW(z->e, cap, z->n + 1) < 0) {
		unzCloseCurrentFile(z->unz);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	e = &z->e[z->n];
	memset(e, 0, sizeof *e);
	e->offset = unzGetCurrentFileZStreamPos64(z->unz);
	rc = check_local_header(z, &fi, name, e->offset, err);
	unzCloseCurrentFile(z->unz);
	if (rc)
		return rc;
	e->method = (int)fi.compression_method;
	e->size = fi.uncompressed_size;
	e->csize = fi.compressed_size;
	e->dirpos = pos.pos_in_zip_directory;
	e->dirnum = pos.num_of_file;
	e->crc = (uint32_t)fi.crc;
	if (e->offset > z->io.size || e->csize > z->io.size - e->offset)
		return sw_fail(err, SW_EDATA, "zip archive: %.100s: its data (%llu bytes at offset %llu) "
			       "lies beyond the end of the file (%llu bytes)", name,
			       (unsigned long long)e->csize, (unsigned long long)e->offset,
			       (unsigned long long)z->io.size);
	if (!(e->name = strdup(name + toplen + 1)))
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	z->n++;
	return SW_OK;
}

/*
 * The end of central directory record ends the file: 22 bytes and its
 * comment. minizip finds the record by its signature and takes a record
 * cut short (its last bytes past the end of the file) or followed by other
 * bytes.
 */
static int check_end_record(struct ptzip *z, struct sw_err *err)
{
	unz_global_info64 gi;
	unsigned char sig[4];
	uint64_t need;
	int rc;

	if ((rc = unzGetGlobalInfo64(z->unz, &gi)) != UNZ_OK)
		return zip_fail(z, rc, err, "unreadable end of central directory");
	need = 22 + (uint64_t)gi.size_comment;
	if (z->io.size < need || io_pread(&z->io, sig, 4, z->io.size - need) < 0 ||
	    memcmp(sig, "PK\5\6", 4))
		return sw_fail(err, z->io.error ? SW_EIO : SW_EDATA, "zip archive: the end of central "
			       "directory record is cut short or followed by other bytes");
	return SW_OK;
}

int ptzip_open(int fd, const void *mem, uint64_t size, struct ptzip *z, struct sw_err *err)
{
	zlib_filefunc64_def ff = {
		io_open, io_read, io_write, io_tell, io_seek, io_close, io_error, NULL,
	};
	size_t cap = 0;
	int rc;

	memset(z, 0, sizeof *z);
	z->io.fd = fd;
	z->io.mem = mem;
	z->io.size = size;
	if (!(z->unz = unzOpen2_64(&z->io, &ff))) {
		if (z->io.error)
			return sw_fail(err, SW_EIO, "zip archive: %s", strerror(z->io.error));
		return sw_fail(err, SW_EDATA, "not a zip archive torch can read (no valid end of "
			       "central directory; truncated?)");
	}
	if ((rc = check_end_record(z, err))) {
		ptzip_close(z);
		return rc;
	}
	rc = unzGoToFirstFile(z->unz);
	if (rc == UNZ_END_OF_LIST_OF_FILE) {
		ptzip_close(z);
		return sw_fail(err, SW_EDATA, "zip archive with no records");
	}
	while (rc == UNZ_OK) {
		if ((rc = take_entry(z, &cap, err))) {
			ptzip_close(z);
			return rc;
		}
		rc = unzGoToNextFile(z->unz);
	}
	if (rc != UNZ_END_OF_LIST_OF_FILE) {
		rc = zip_fail(z, rc, err, "unreadable central directory");
		ptzip_close(z);
		return rc;
	}
	if (z->n > 1)
		qsort(z->e, z->n, sizeof *z->e, entry_cmp);
	for (size_t i = 1; i < z->n; i++)
		if (!strcmp(z->e[i - 1].name, z->e[i].name)) {
			rc = sw_fail(err, SW_EDATA, "zip archive: two records named %s/%.100s: refused "
				     "as ambiguous", z->top, z->e[i].name);
			ptzip_close(z);
			return rc;
		}
	return SW_OK;
}

void ptzip_close(struct ptzip *z)
{
	if (z->unz)
		unzClose(z->unz);
	for (size_t i = 0; i < z->n; i++)
		free(z->e[i].name);
	free(z->e);
	memset(z, 0, sizeof *z);
	z->io.fd = -1;
}

const struct ptzip_entry *ptzip_find(const struct ptzip *z, const char *name)
{
	struct ptzip_entry key = {.name = (char *)name};

	return z->n ? bsearch(&key, z->e, z->n, sizeof *z->e, entry_cmp) : NULL;
}

int ptzip_read(struct ptzip *z, const struct ptzip_entry *e, size_t max, char **buf,
	       size_t *len, struct sw_err *err)
{
	unz64_file_pos pos = {e->dirpos, e->dirnum};
	size_t done = 0;
	char extra;
	int rc, got;

	*buf = NULL;
	*len = 0;
	if (e->size > max)
		return sw_fail(err, SW_EDATA, "%s/%s: %llu bytes, more than the %zu read", z->top,
			       e->name, (unsigned long long)e->size, max);
	if ((rc = unzGoToFilePos64(z->unz, &pos)) != UNZ_OK ||
	    (rc = unzOpenCurrentFile(z->unz)) != UNZ_OK)
		return zip_fail(z, rc, err, e->name);
	if (!(*buf = malloc((size_t)e->size + 1))) {
		unzCloseCurrentFile(z->unz);
		return sw_fail(err, SW_ESOFTWARE, "out of memory");
	}
	while (done < e->size) {
		size_t want = e->size - done;
		got = unzReadCurrentFile(z->unz, *buf + done, want > (1u << 30) ? 1u << 30 : (unsigned)want);
		if (got <= 0)
			break;
		done += (size_t)got;
	}
	/* a deflated stream that inflates to more than its stated size */
	if (done == e->size && unzReadCurrentFile(z->unz, &extra, 1) != 0)
		done = e->size + 1;
	rc = unzCloseCurrentFile(z->unz);
	/* the CRC is checked below, by the rule for a CRC of 0 */
	if (rc == UNZ_CRCERROR)
		rc = UNZ_OK;
	if (rc == UNZ_OK && done == e->size && !ptzip_crc_ok(e->crc, e->method, *buf, done))
		rc = UNZ_CRCERROR;
	if (done != e->size || rc != UNZ_OK) {
		free(*buf);
		*buf = NULL;
		if (z->io.error)
			return sw_fail(err, SW_EIO, "%s/%s: %s", z->top, e->name, strerror(z->io.error));
		return sw_fail(err, SW_EDATA, "%s/%s: %s", z->top, e->name,
			       rc == UNZ_CRCERROR ? "its CRC-32 does not match its data" :
			       "its data is shorter or longer than its stated size, or corrupt");
	}
	(*buf)[done] = '\0';
	*len = done;
	return SW_OK;
}

int ptzip_crc_ok(uint32_t crc, int method, const void *buf, uint64_t len)
{
	const unsigned char *p = buf;
	uLong got = crc32(0L, Z_NULL, 0);

	if (crc == 0 && method == 0)
		return 1;
	/* zlib's lengths are uInt: a storage of gigabytes in pieces */
	while (len) {
		uInt n = len > (1u << 30) ? 1u << 30 : (uInt)len;
		got = crc32(got, p, n);
		p += n;
		len -= n;
	}
	return (uint32_t)got == crc;
}
