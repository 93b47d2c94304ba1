// runtime.c is Strata's AppImage type-2 runtime: the ELF program at the front of
// Strata-x86_64.AppImage. The squashfs image of the AppDir follows the ELF directly; the
// bytes "AI\x02" at offset 8 mark the file as a type-2 AppImage (appimage.sh writes them).
//
//   Strata-x86_64.AppImage [ARGS]                     mount the image with FUSE, run AppRun
//   Strata-x86_64.AppImage --appimage-extract-and-run [ARGS]
//                                                     extract to a temporary folder, run, remove
//   Strata-x86_64.AppImage --appimage-extract         extract to ./squashfs-root
//   Strata-x86_64.AppImage --appimage-offset          print where the squashfs starts
//
// Where FUSE cannot mount (no /dev/fuse, no fusermount3, containers), it falls back to
// extract-and-run, as it does when APPIMAGE_EXTRACT_AND_RUN=1. It is linked statically
// against Debian's squashfuse (squashfs reader and FUSE low-level operations) and fuse3, so
// the AppImage needs neither installed.
#define _GNU_SOURCE
#include <squashfuse/ll.h>

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define SQUASHFS_MAGIC_BYTES "hsqs"

// die prints a message naming the image and exits with status 127, like a shell that cannot
// run a command.
static void die(const char *image, const char *what, const char *detail) {
	fprintf(stderr, "appimage: %s: %s%s%s\n", image, what, detail ? ": " : "", detail ? detail : "");
	exit(127);
}

// elf_end returns the end of the ELF program in the file: the largest of the section header
// table's end, the program header table's end and every segment's end. The squashfs starts
// there. It returns 0 on a file that is not a 64-bit little-endian ELF.
static off_t elf_end(int fd) {
	Elf64_Ehdr eh;
	if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
		return 0;
	off_t end = (off_t)(eh.e_shoff + (uint64_t)eh.e_shnum * eh.e_shentsize);
	off_t ph_end = (off_t)(eh.e_phoff + (uint64_t)eh.e_phnum * eh.e_phentsize);
	if (ph_end > end)
		end = ph_end;
	for (int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) != (ssize_t)sizeof ph)
			return 0;
		if ((off_t)(ph.p_offset + ph.p_filesz) > end)
			end = (off_t)(ph.p_offset + ph.p_filesz);
	}
	return end;
}

// image_offset finds the squashfs in the image and checks its magic.
static off_t image_offset(const char *image) {
	int fd = open(image, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die(image, "open", strerror(errno));
	off_t off = elf_end(fd);
	char magic[4];
	if (off <= 0 || pread(fd, magic, sizeof magic, off) != (ssize_t)sizeof magic ||
	    memcmp(magic, SQUASHFS_MAGIC_BYTES, 4) != 0) {
		close(fd);
		die(image, "no squashfs image after the runtime", NULL);
	}
	close(fd);
	return off;
}

// write_all writes n bytes or fails.
static int write_all(int fd, const char *p, size_t n) {
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

// extract_file copies one regular file out of the image.
static int extract_file(sqfs *fs, sqfs_inode *inode, const char *path) {
	int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0)
		return -1;
	static char buf[1 << 16];
	sqfs_off_t size = (sqfs_off_t)inode->xtra.reg.file_size;
	for (sqfs_off_t pos = 0; pos < size;) {
		sqfs_off_t n = size - pos < (sqfs_off_t)sizeof buf ? size - pos : (sqfs_off_t)sizeof buf;
		if (sqfs_read_range(fs, inode, pos, &n, buf) != SQFS_OK || n <= 0 || write_all(out, buf, (size_t)n) != 0) {
			close(out);
			errno = EIO;
			return -1;
		}
		pos += n;
	}
	if (fchmod(out, inode->base.mode & 07777) != 0) {
		close(out);
		return -1;
	}
	return close(out);
}

// extract writes every file, folder and symlink of the image under dest (which exists).
static void extract(const char *image, off_t offset, const char *dest) {
	sqfs fs;
	if (sqfs_open_image(&fs, image, (size_t)offset) != SQFS_OK)
		die(image, "cannot read the squashfs image", NULL);
	sqfs_traverse trv;
	if (sqfs_traverse_open(&trv, &fs, sqfs_inode_root(&fs)) != SQFS_OK)
		die(image, "cannot walk the squashfs image", NULL);
	sqfs_err err = SQFS_OK;
	char path[PATH_MAX];
	while (sqfs_traverse_next(&trv, &err)) {
		if (trv.dir_end)
			continue;
		if (snprintf(path, sizeof path, "%s/%s", dest, trv.path) >= (int)sizeof path)
			die(image, "path too long", trv.path);
		sqfs_inode inode;
		if (sqfs_inode_get(&fs, &inode, trv.entry.inode) != SQFS_OK)
			die(image, "bad inode", trv.path);
		int rc = 0;
		switch (inode.base.mode & S_IFMT) {
		case S_IFDIR:
			rc = mkdir(path, 0755);
			if (rc != 0 && errno == EEXIST)
				rc = 0;
			break;
		case S_IFREG:
			unlink(path);
			rc = extract_file(&fs, &inode, path);
			break;
		case S_IFLNK: {
			char target[PATH_MAX];
			size_t n = sizeof target;
			if (sqfs_readlink(&fs, &inode, target, &n) != SQFS_OK) {
				errno = EIO;
				rc = -1;
				break;
			}
			unlink(path);
			rc = symlink(target, path);
			break;
		}
		default: // devices, fifos and sockets have no place in an AppDir
			break;
		}
		if (rc != 0)
			die(image, path, strerror(errno));
	}
	if (err != SQFS_OK)
		die(image, "error walking the squashfs image", NULL);
	sqfs_traverse_close(&trv);
	sqfs_destroy(&fs);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
	(void)st, (void)flag, (void)ftw;
	return remove(path);
}

// set_env tells AppRun and the app where they run from (the AppImage conventions).
static void set_env(const char *image, const char *appdir, const char *argv0) {
	setenv("APPIMAGE", image, 1);
	setenv("APPDIR", appdir, 1);
	setenv("ARGV0", argv0, 1);
}

// exec_apprun replaces the process with APPDIR/AppRun.
static void exec_apprun(const char *image, const char *appdir, int argc, char **argv) {
	char apprun[PATH_MAX];
	snprintf(apprun, sizeof apprun, "%s/AppRun", appdir);
	char **args = calloc((size_t)argc + 2, sizeof *args);
	if (args == NULL)
		die(image, "out of memory", NULL);
	args[0] = apprun;
	for (int i = 0; i < argc; i++)
		args[i + 1] = argv[i];
	execv(apprun, args);
	die(image, apprun, strerror(errno));
}

// child_pid is the app extract_and_run waits for; forward hands it the signals the runtime
// gets, so `kill RUNTIME` stops the app and the runtime still removes the folder. (A signal
// handler can only reach a static.)
static volatile sig_atomic_t child_pid;

static void forward(int sig) {
	if (child_pid > 0)
		kill((pid_t)child_pid, sig);
}

// extract_and_run extracts into a fresh temporary folder, runs AppRun there, removes the
// folder and returns AppRun's exit status.
static int extract_and_run(const char *image, off_t offset, const char *argv0, int argc, char **argv) {
	const char *tmp = getenv("TMPDIR");
	char dir[PATH_MAX];
	snprintf(dir, sizeof dir, "%s/appimage_extracted_XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (mkdtemp(dir) == NULL)
		die(image, dir, strerror(errno));
	extract(image, offset, dir);
	set_env(image, dir, argv0);
	pid_t pid = fork();
	if (pid < 0)
		die(image, "fork", strerror(errno));
	if (pid == 0)
		exec_apprun(image, dir, argc, argv);
	// The app gets the runtime's signals (Ctrl-C reaches both); the runtime stays to clean up.
	child_pid = pid;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = forward;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGINT, SIG_IGN);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
	}
	nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

// detach_and_remove makes sure the mount point is gone. The app may still be tearing down its
// mappings of files on the mount when this process learns it has exited, so the plain unmount
// above can fail with EBUSY and leave a dead mount behind; a lazy detach (umount2 as root,
// fusermount3 -uz otherwise) always succeeds, after which the empty folder can be removed.
static void detach_and_remove(const char *mnt) {
	for (int i = 0; i < 50 && rmdir(mnt) != 0; i++) {
		if (umount2(mnt, MNT_DETACH) != 0) {
			pid_t pid = fork();
			if (pid == 0) {
				execlp("fusermount3", "fusermount3", "-u", "-z", mnt, (char *)NULL);
				_exit(127);
			}
			if (pid > 0)
				waitpid(pid, NULL, 0);
		}
		usleep(100 * 1000);
	}
}

// serve_fuse runs in the child: it mounts the image at mnt, tells the parent through ready
// ('1' mounted, '0' failed) and serves requests until the parent (the app) exits.
static void serve_fuse(const char *image, off_t offset, const char *mnt, int ready, pid_t parent) {
	setsid(); // Ctrl-C in the terminal goes to the app, not to the file system
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != parent)
		_exit(0);
	sqfs_ll *ll = sqfs_ll_open(image, (size_t)offset);
	if (ll == NULL) {
		(void)!write(ready, "0", 1);
		_exit(1);
	}
	struct fuse_lowlevel_ops ops;
	memset(&ops, 0, sizeof ops);
	ops.getattr = sqfs_ll_op_getattr;
	ops.opendir = sqfs_ll_op_opendir;
	ops.releasedir = sqfs_ll_op_releasedir;
	ops.readdir = sqfs_ll_op_readdir;
	ops.lookup = sqfs_ll_op_lookup;
	ops.open = sqfs_ll_op_open;
	ops.create = sqfs_ll_op_create;
	ops.release = sqfs_ll_op_release;
	ops.read = sqfs_ll_op_read;
	ops.readlink = sqfs_ll_op_readlink;
	ops.listxattr = sqfs_ll_op_listxattr;
	ops.getxattr = sqfs_ll_op_getxattr;
	ops.forget = sqfs_ll_op_forget;
	ops.statfs = stfs_ll_op_statfs;
	char *fargv[] = {"appimage", "-o", "ro,nosuid,nodev", NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	sqfs_ll_chan ch;
	if (sqfs_ll_mount(&ch, mnt, &args, &ops, sizeof ops, ll) != SQFS_OK) {
		(void)!write(ready, "0", 1);
		_exit(1);
	}
	if (fuse_set_signal_handlers(ch.session) != 0) {
		sqfs_ll_unmount(&ch, mnt);
		(void)!write(ready, "0", 1);
		_exit(1);
	}
	(void)!write(ready, "1", 1);
	close(ready);
	fuse_session_loop(ch.session);
	// Detach first and leave the rest to _exit: the library's own unmount-and-free path
	// sometimes left a dead mount behind here (the process gone, the folder still mounted).
	detach_and_remove(mnt);
	_exit(0);
}

// mount_and_run mounts the image in a child process and execs AppRun from the mount; it
// returns only when the mount failed (the caller then extracts instead).
static void mount_and_run(const char *image, off_t offset, const char *argv0, int argc, char **argv) {
	if (access("/dev/fuse", R_OK | W_OK) != 0)
		return;
	const char *tmp = getenv("TMPDIR");
	char mnt[PATH_MAX];
	snprintf(mnt, sizeof mnt, "%s/.mount_StrataXXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (mkdtemp(mnt) == NULL)
		return;
	int p[2];
	if (pipe2(p, O_CLOEXEC) != 0) {
		rmdir(mnt);
		return;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		rmdir(mnt);
		return;
	}
	if (pid == 0) {
		close(p[0]);
		serve_fuse(image, offset, mnt, p[1], parent);
	}
	close(p[1]);
	char ok = '0';
	while (read(p[0], &ok, 1) < 0 && errno == EINTR) {
	}
	close(p[0]);
	if (ok != '1') {
		waitpid(pid, NULL, 0);
		rmdir(mnt);
		fprintf(stderr, "appimage: FUSE mount failed; extracting instead (set APPIMAGE_EXTRACT_AND_RUN=1 to skip the attempt)\n");
		return;
	}
	set_env(image, mnt, argv0);
	exec_apprun(image, mnt, argc, argv);
}

int main(int argc, char **argv) {
	char image[PATH_MAX];
	if (realpath("/proc/self/exe", image) == NULL)
		die("/proc/self/exe", "cannot resolve", strerror(errno));
	off_t offset = image_offset(image);
	const char *argv0 = argv[0];
	const char *arg = argc > 1 ? argv[1] : "";

	if (strcmp(arg, "--appimage-offset") == 0) {
		printf("%lld\n", (long long)offset);
		return 0;
	}
	if (strcmp(arg, "--appimage-extract") == 0) {
		if (mkdir("squashfs-root", 0755) != 0 && errno != EEXIST)
			die(image, "squashfs-root", strerror(errno));
		extract(image, offset, "squashfs-root");
		fprintf(stderr, "appimage: extracted to squashfs-root\n");
		return 0;
	}
	if (strcmp(arg, "--appimage-extract-and-run") == 0)
		return extract_and_run(image, offset, argv0, argc - 2, argv + 2);
	if (strncmp(arg, "--appimage-", 11) == 0) {
		fprintf(stderr, "appimage: unknown option %s (known: --appimage-extract, --appimage-extract-and-run, --appimage-offset)\n", arg);
		return 2;
	}
	const char *force = getenv("APPIMAGE_EXTRACT_AND_RUN");
	if (force == NULL || strcmp(force, "1") != 0)
		mount_and_run(image, offset, argv0, argc - 1, argv + 1);
	return extract_and_run(image, offset, argv0, argc - 1, argv + 1);
}
