/*
 * A fake NVMe controller for a real nvme-cli binary: LD_PRELOAD this library and point
 * nvme-cli at any character device (/dev/null); its admin commands are answered from files.
 *
 *   cc -shared -fPIC -o fake_nvme.so fake_nvme.c -ldl
 *   FAKE_NVME_DIR=DIR LD_PRELOAD=./fake_nvme.so nvme id-ctrl /dev/null -o json
 *
 * Identify (opcode 06h) with CNS c for namespace n reads DIR/identify-c-n.bin; Get Log Page
 * (02h) for log l reads DIR/log-l.bin from the command's offset (zeros past the file's end).
 * A command with no file completes with Invalid Field in Command; any other ioctl on any
 * file descriptor goes to the real one (NVME_IOCTL_ID fails with ENOTTY, as on a device
 * nvme-cli cannot take a namespace from). tests/test_nvme_cli_json.py writes the files
 * with ssdtwin (`id-ctrl -b`, `get-log -b` ...) and compares nvme-cli's JSON with the twin's.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* _IOWR('N', 0x41, struct nvme_passthru_cmd), _IOWR('N', 0x47, struct nvme_passthru_cmd64),
 * _IO('N', 0x40). */
#define NVME_IOCTL_ADMIN_CMD 0xC0484E41UL
#define NVME_IOCTL_ADMIN64_CMD 0xC0504E47UL
#define NVME_IOCTL_ID 0x4E40UL

#define NVME_SC_INVALID_FIELD 0x2

/* The fields both passthru layouts share (linux/nvme_ioctl.h). */
struct passthru {
	uint8_t opcode;
	uint8_t flags;
	uint16_t rsvd1;
	uint32_t nsid;
	uint32_t cdw2, cdw3;
	uint64_t metadata;
	uint64_t addr;
	uint32_t metadata_len;
	uint32_t data_len;
	uint32_t cdw10, cdw11, cdw12, cdw13, cdw14, cdw15;
};

static int answer(struct passthru *cmd)
{
	const char *dir = getenv("FAKE_NVME_DIR");
	char path[4096];
	uint64_t offset = 0;
	FILE *f;
	size_t got;

	if (!dir)
		return NVME_SC_INVALID_FIELD;
	if (cmd->opcode == 0x06) {
		snprintf(path, sizeof(path), "%s/identify-%u-%u.bin", dir, cmd->cdw10 & 0xff, cmd->nsid);
	} else if (cmd->opcode == 0x02) {
		snprintf(path, sizeof(path), "%s/log-%u.bin", dir, cmd->cdw10 & 0xff);
		offset = (uint64_t)cmd->cdw12 | (uint64_t)cmd->cdw13 << 32;
	} else {
		return NVME_SC_INVALID_FIELD;
	}
	f = fopen(path, "rb");
	if (!f)
		return NVME_SC_INVALID_FIELD;
	memset((void *)(uintptr_t)cmd->addr, 0, cmd->data_len);
	got = 0;
	if (fseek(f, (long)offset, SEEK_SET) == 0)
		got = fread((void *)(uintptr_t)cmd->addr, 1, cmd->data_len, f);
	(void)got;
	fclose(f);
	return 0;
}

int ioctl(int fd, unsigned long request, ...)
{
	static int (*real_ioctl)(int, unsigned long, ...);
	va_list ap;
	void *arg;

	va_start(ap, request);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (request == NVME_IOCTL_ADMIN_CMD || request == NVME_IOCTL_ADMIN64_CMD)
		return answer(arg);
	if (request == NVME_IOCTL_ID) {
		errno = ENOTTY;
		return -1;
	}
	if (!real_ioctl)
		real_ioctl = (int (*)(int, unsigned long, ...))dlsym(RTLD_NEXT, "ioctl");
	return real_ioctl(fd, request, arg);
}
