package platform

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// diskSpace asks statfs about the filesystem that holds dir.
func diskSpace(dir string) (free, total int64, fs string, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, "", fmt.Errorf("statfs %s: %w", dir, err)
	}
	bs := int64(st.Bsize)
	return int64(st.Bavail) * bs, int64(st.Blocks) * bs, fsName(int64(st.Type)), nil
}

// fsName names the filesystems a model file is likely to sit on (statfs f_type magic).
func fsName(magic int64) string {
	switch magic {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlay"
	case unix.NFS_SUPER_MAGIC:
		return "nfs"
	case unix.V9FS_MAGIC:
		return "9p" // WSL2's view of Windows drives (/mnt/c): slow for large models
	case 0x65735546:
		return "fuse"
	case 0x5346544e:
		return "ntfs"
	case 0x2011BAB0:
		return "exfat"
	case 0xF15F:
		return "ecryptfs"
	case 0x2fc12fc1:
		return "zfs"
	}
	return fmt.Sprintf("0x%x", magic)
}

// dropCache asks the kernel to forget the cached pages of a range so a buffered read goes to
// the drive (only clean pages are dropped).
func dropCache(f *os.File, off, n int64) error {
	return unix.Fadvise(int(f.Fd()), off, n, unix.FADV_DONTNEED)
}
