/* The benchmark's floors: each raw operation in plain C, so a ratio says what Forsetti adds
   over the work itself and nothing about Swift or Foundation. forsetti-bench compiles this
   with cc at bench time and runs it once per round, alternated with the figure it is the floor
   of. Each command prints the nanoseconds it measured (per operation where it says so) on one
   line; a failure prints nothing and exits 1, so no floor is ever a made-up number.

     floors reload SRC SYMBOL SCRATCH   copy SRC to SCRATCH.N (read + write), dlopen, dlsym;
                                        the median of five
     floors gate DIR COUNT              read DIR/manifests/entry_N.json whole, then a libelf scan
                                        of DIR/plugins/entry_N.so for the symbol entry_N
     floors spawn ROUNDS                posix_spawn + waitpid of /bin/true, per spawn
     floors echo OPS                    SOCK_SEQPACKET socketpair echo to a forked child, per
                                        round trip (a 24-byte request, a 16-byte answer) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static long long now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static char buffer[1 << 16];

static int copy(const char *from, const char *to) {
  int in = open(from, O_RDONLY | O_CLOEXEC);
  if (in < 0) return -1;
  int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
  if (out < 0) { close(in); return -1; }
  ssize_t n;
  while ((n = read(in, buffer, sizeof buffer)) > 0) {
    if (write(out, buffer, (size_t)n) != n) { n = -1; break; }
  }
  close(in);
  return close(out) == 0 && n == 0 ? 0 : -1;
}

static int by_value(const void *a, const void *b) {
  long long x = *(const long long *)a, y = *(const long long *)b;
  return (x > y) - (x < y);
}

/* Five reloads of SRC, each copied to a name of its own (dlopen of a known path would return
   the library already loaded), the median printed: a long-running host has paid the process's
   first dlopen long before, and one preemption on a loaded machine is not the floor. */
static int reload(const char *src, const char *symbol, const char *scratch) {
  enum { times = 5 };
  long long t[times];
  char path[4096];
  for (int i = 0; i < times; i++) {
    snprintf(path, sizeof path, "%s.%d", scratch, i);
    long long t0 = now();
    if (copy(src, path) != 0) return 1;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h || !dlsym(h, symbol)) return 1;
    t[i] = now() - t0;
  }
  qsort(t, times, sizeof t[0], by_value);
  printf("%lld\n", t[times / 2]);
  return 0;
}

/* One file's scan: find .dynsym, then the symbol by name, as the host's inspection must. */
static int scan(const char *path, const char *name) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
  int found = 0;
  for (Elf_Scn *s = elf ? elf_nextscn(elf, NULL) : NULL; s; s = elf_nextscn(elf, s)) {
    GElf_Shdr shdr;
    Elf_Data *data;
    if (!gelf_getshdr(s, &shdr) || shdr.sh_type != SHT_DYNSYM || !(data = elf_getdata(s, NULL))) continue;
    size_t count = shdr.sh_entsize ? shdr.sh_size / shdr.sh_entsize : 0;
    for (size_t i = 0; i < count; i++) {
      GElf_Sym sym;
      const char *p;
      if (gelf_getsym(data, (int)i, &sym) && (p = elf_strptr(elf, shdr.sh_link, sym.st_name)) && !strcmp(p, name))
        found = 1;
    }
  }
  if (elf) elf_end(elf);
  close(fd);
  return found;
}

static int gate(const char *dir, long count) {
  char path[4096], name[32];
  long long t0 = now();
  long found = 0;
  size_t bytes = 0;
  elf_version(EV_CURRENT);
  for (long n = 0; n < count; n++) {
    snprintf(path, sizeof path, "%s/manifests/entry_%06ld.json", dir, n);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 1;
    ssize_t r;
    while ((r = read(fd, buffer, sizeof buffer)) > 0) bytes += (size_t)r;
    close(fd);
    snprintf(name, sizeof name, "entry_%06ld", n);
    snprintf(path, sizeof path, "%s/plugins/%s.so", dir, name);
    found += scan(path, name);
  }
  if (found != count || bytes == 0) return 1;
  printf("%lld\n", now() - t0);
  return 0;
}

static int spawn(long rounds) {
  char *argv[] = {"/bin/true", NULL};
  long long t0 = now();
  for (long i = 0; i < rounds; i++) {
    pid_t pid;
    int status;
    if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) != 0) return 1;
    if (waitpid(pid, &status, 0) != pid || status != 0) return 1;
  }
  printf("%lld\n", (now() - t0) / rounds);
  return 0;
}

static int echo(long ops) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return 1;
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    close(sv[0]);
    char b[256];
    while (recv(sv[1], b, sizeof b, 0) > 0) send(sv[1], b, 16, MSG_NOSIGNAL);
    _exit(0);
  }
  close(sv[1]);
  char request[24] = "publish bench.nobody", reply[256];
  /* 200 untimed, as the host call's loop is measured after the worker is warm. */
  for (int i = 0; i < 200; i++) {
    send(sv[0], request, sizeof request, MSG_NOSIGNAL);
    recv(sv[0], reply, sizeof reply, 0);
  }
  long long t0 = now();
  for (long i = 0; i < ops; i++) {
    if (send(sv[0], request, sizeof request, MSG_NOSIGNAL) != sizeof request) return 1;
    if (recv(sv[0], reply, sizeof reply, 0) != 16) return 1;
  }
  long long t = now() - t0;
  close(sv[0]);
  int status;
  waitpid(pid, &status, 0);
  printf("%lld\n", t / ops);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "reload")) return reload(argv[2], argv[3], argv[4]);
  if (argc == 4 && !strcmp(argv[1], "gate")) return gate(argv[2], atol(argv[3]));
  if (argc == 3 && !strcmp(argv[1], "spawn") && atol(argv[2]) > 0) return spawn(atol(argv[2]));
  if (argc == 3 && !strcmp(argv[1], "echo") && atol(argv[2]) > 0) return echo(atol(argv[2]));
  fprintf(stderr, "usage: floors reload SRC SYMBOL SCRATCH | gate DIR COUNT | spawn ROUNDS | echo OPS\n");
  return 2;
}
