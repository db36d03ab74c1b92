/*
 * h5io.h - what every HDF5 module of lib/ shares: scalar attributes read
 * with type checks and written, groups created without timestamps,
 * /config, HDF5's error stack as one line, and the rules every reader of
 * a file from elsewhere applies (docs/trust.md;
 * scalewatch-format(5), "What an HDF5 reader refuses"): the file HDF5
 * reads is the regular file the caller opened, no link leaves it, and a
 * dataset's data is inside it, written, decodable here and no bomb. The
 * checkpoint reader is h5read.c, the writer h5write.c, the trace's
 * tracewrite.c and traceread.c; all use these.
 */
#ifndef SW_H5IO_H
#define SW_H5IO_H

#include <hdf5.h>
#include <stdint.h>

#include "../base/arch.h"
#include "../base/status.h"
#include "../base/tensor.h"

/*
 * Scalar attributes of obj (objname names it in messages). present == NULL
 * means required: a missing attribute is SW_EDATA. Otherwise *present says
 * whether it was there. Strings may be fixed-length or variable-length
 * (h5py's default); numbers may be stored as any integer or float type.
 */
int h5io_get_str(hid_t obj, const char *objname, const char *attr, char *buf,
		 size_t len, int *present, struct sw_err *err);
int h5io_get_i64(hid_t obj, const char *objname, const char *attr, int64_t *v,
		 int *present, struct sw_err *err);
int h5io_get_f64(hid_t obj, const char *objname, const char *attr, double *v,
		 int *present, struct sw_err *err);

/* Scalar attributes on an open object (replacing any of that name):
 * strings variable-length UTF-8, integers int64, reals float64. */
int h5io_put_str(hid_t obj, const char *name, const char *val, struct sw_err *err);
int h5io_put_i64(hid_t obj, const char *name, int64_t val, struct sw_err *err);
int h5io_put_f64(hid_t obj, const char *name, double val, struct sw_err *err);

/* Open group path of file ("/" or "/config"), creating it (without
 * timestamps) when missing; H5I_INVALID_HID on failure. */
hid_t h5io_group(hid_t file, const char *path);

/* /config attributes from c. */
int h5io_write_config(hid_t file, const struct sw_config *c, struct sw_err *err);

/*
 * /config into c, checked (a supported arch, sizes that agree:
 * arch_config_check; head_dim d_model/n_heads when not given). exists
 * NULL: a missing /config is SW_EDATA; else *exists says whether it is
 * there (c untouched when not).
 */
int h5io_read_config(hid_t file, struct sw_config *c, int *exists, struct sw_err *err);

/* The innermost message on HDF5's error stack ("truncated file: eof = ..."),
 * or "" if none. Returns the errno of the failed system call it reports
 * (ENOSPC on a full disk), else 0. */
int h5io_last_error(char *buf, size_t len);

/* ---- files from strangers ---- */

/* A filtered (compressed) dataset may decode to at most this many times
 * the bytes it has in the file, unless it decodes to less than
 * H5IO_BOMB_FLOOR bytes: deflate's best is about 1030:1 (zeros), trained
 * float32 weights about 1.1:1, a tensor 99% zeros 100:1. (Our writers
 * never compress; one that is 99.9% zeros, 420:1, must not be either.) */
#define H5IO_BOMB_RATIO 256
#define H5IO_BOMB_FLOOR ((uint64_t)64 << 20)

/*
 * What every reader sets before it opens a file: HDF5 prints nothing and
 * loads no plugin (a filter this libhdf5 lacks is refused by number; a
 * plugin is code, and which one would be the file's choice). These are
 * settings of libhdf5, the same for every caller in the process; calling
 * again does nothing new. (External links are not unregistered: every
 * path a reader follows is checked link by link with h5io_hard_path, and
 * fuzz-h5ckpt, which plants external links, could make none then.)
 */
void h5io_reader_setup(void);

/*
 * Open with HDF5 (flags, fapl as H5Fopen takes them) the file fd is open
 * on, which must be a regular file: through /proc/self/fd/N where the
 * system has it, so path is not opened a second time (nothing swapped in
 * between, a FIFO or another file, is ever opened), else through path,
 * checked afterwards to be fd's file. Returns the file, or
 * H5I_INVALID_HID with *changed set when path named another file by then
 * (else HDF5 failed: h5io_last_error says why).
 */
hid_t h5io_open_fd(const char *path, int fd, unsigned flags, hid_t fapl, int *changed);

/*
 * The same for H5Fcreate (H5F_ACC_TRUNC, fcpl, fapl): the file fd is open
 * on (a writer opened it O_NOFOLLOW) is emptied and made an HDF5 file,
 * never a file a link at path leads to. Without /proc a swap of path
 * between the check and HDF5's open is caught only afterwards (*changed),
 * when the file swapped in is already truncated.
 */
hid_t h5io_create_fd(const char *path, int fd, hid_t fcpl, hid_t fapl, int *changed);

/* Same device and inode: is path (now) the file fd is open on? */
int h5io_same_inode(const char *path, int fd);

/*
 * Every link on the absolute path ("/params/NAME") is a hard link: a soft
 * or external link could lead anywhere, another file included. Checked
 * from the root down, so no link is followed before it is checked.
 * exists == NULL: a missing link is SW_EDATA; else *exists says whether
 * the whole path is there.
 */
int h5io_hard_path(hid_t file, const char *path, int *exists, struct sw_err *err);

/*
 * Where dataset d (objname names it in messages) keeps its data: inside
 * this file (no virtual dataset, no external raw storage), through
 * filters this libhdf5 has and can decode. SW_EDATA if not.
 */
int h5io_check_layout(hid_t d, const char *objname, struct sw_err *err);

/*
 * The data of rows [row0, row1) of d (row1 < 0: to the end; a scalar is
 * one row) was written: contiguous storage allocated, every chunk holding
 * one of those rows stored (a missing one would read as fill values), and
 * filtered chunks within H5IO_BOMB_RATIO of what they decode to. Checked
 * from the chunk index, before anything is read or allocated. SW_EDATA if
 * not. upto == NULL: every row must be written. Otherwise the chunks that
 * hold the last row may be missing (what a writer that stopped in its last
 * flush leaves) and *upto is the row where the written rows end.
 */
int h5io_check_written(hid_t d, const char *objname, int64_t row0, int64_t row1,
		       int64_t *upto, struct sw_err *err);

/* Both, over the whole dataset. */
int h5io_check_dataset(hid_t d, const char *objname, struct sw_err *err);

/* The exit status for an output that failed with that errno: an I/O
 * error (74) for a full disk, quota or file-size limit or EIO, else
 * cannot create (73). */
int h5io_create_status(int errno_code);

#endif
