/*
 * ptzip.h - the zip container of PyTorch checkpoints (torch.save since
 * torch 1.6: .pt, .pth, pytorch_model.bin), read through zlib's minizip.
 *
 * torch's writer puts every record under one top folder ("archive/",
 * or the file's stem): data.pkl (the pickle, lib/formats/pickle.h), data/KEY (one
 * storage's raw bytes each), version, byteorder, .data/... Every record
 * is STORED (uncompressed), its data aligned to 64 bytes, so a storage is
 * mapped in place (ckptsrc_map) at the offset minizip gives
 * (unzGetCurrentFileZStreamPos64: what libzip has no call for).
 *
 * The archive is read as torch's reader reads it, or refused (SW_EDATA):
 * every name under the one top folder, no name twice, no NUL inside a
 * name, no encryption, every record's data inside the file and, for a
 * STORED record, its two sizes equal. A DEFLATED record is read only
 * through ptzip_read (data.pkl, version); storages must be STORED.
 * minizip reads through the functions here (pread on the open fd, or a
 * buffer for the fuzzer): the file is never opened again by name.
 */
#ifndef SW_PTZIP_H
#define SW_PTZIP_H

#include <stddef.h>
#include <stdint.h>

#include "../base/status.h"

#define PTZIP_NAME_MAX 512

struct ptzip_entry {
	char *name;             /* below the top folder: "data.pkl", "data/0" */
	int method;             /* 0 STORED, 8 DEFLATED */
	uint64_t size;          /* bytes once read */
	uint64_t csize;         /* bytes in the file */
	uint64_t offset;        /* absolute offset of its data in the file */
	uint64_t dirpos, dirnum;        /* minizip's position of it (unz64_file_pos) */
	uint32_t crc;           /* its CRC-32; 0: not computed (torch's compute_crc32=False) */
};

/* How minizip reads the archive: the open file fd, or mem (the fuzzer). */
struct ptzip_io {
	int fd;
	const unsigned char *mem;
	uint64_t size, pos;
	int error;
};

struct ptzip {
	struct ptzip_io io;
	void *unz;              /* minizip's unzFile */
	char top[PTZIP_NAME_MAX];       /* the top folder, "archive" */
	struct ptzip_entry *e;  /* (n) sorted by name */
	size_t n;
};

/* 1 if the open file fd starts as a zip archive does (a local header,
 * "PK\3\4"), as torch.load tells its zip files from its legacy ones. */
int ptzip_sniff(int fd, uint64_t size);

/* Read the central directory of the file open at fd (size bytes; fd not
 * owned) or of the size bytes at mem (fd -1). */
int ptzip_open(int fd, const void *mem, uint64_t size, struct ptzip *z, struct sw_err *err);
void ptzip_close(struct ptzip *z);

/* The record named top/name, or NULL. */
const struct ptzip_entry *ptzip_find(const struct ptzip *z, const char *name);

/* The whole of a record (at most max bytes, else SW_EDATA) into a
 * malloc'ed buffer, NUL-terminated; DEFLATED ones inflated, the CRC
 * checked (ptzip_crc_ok). */
int ptzip_read(struct ptzip *z, const struct ptzip_entry *e, size_t max, char **buf,
	       size_t *len, struct sw_err *err);

/*
 * 1 if the len bytes at buf, the whole of a record of method (0 stored, 8
 * deflated), have the CRC-32 crc its entry gives. A stored record's CRC
 * of 0 is "not computed" (torch.save with compute_crc32=False, which
 * torch.load reads) and matches any bytes; a deflated record's is always
 * computed (torch deflates nothing: whatever deflated it computed one).
 */
int ptzip_crc_ok(uint32_t crc, int method, const void *buf, uint64_t len);

#endif
