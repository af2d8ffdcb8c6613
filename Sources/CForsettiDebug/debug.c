#include "forsetti_debug.h"

#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define FORSETTI_DEBUG_LIBRARY "libdw.so.1"

static struct {
  __typeof__(&dwfl_begin) begin;
  __typeof__(&dwfl_report_begin) report_begin;
  __typeof__(&dwfl_report_elf) report_elf;
  __typeof__(&dwfl_report_end) report_end;
  __typeof__(&dwfl_end) end;
  __typeof__(&dwfl_build_id_find_elf) build_id_find_elf;
  __typeof__(&dwfl_standard_find_debuginfo) standard_find_debuginfo;
  __typeof__(&dwfl_attach_state) attach_state;
  __typeof__(&dwfl_getthread_frames) getthread_frames;
  __typeof__(&dwfl_frame_pc) frame_pc;
  __typeof__(&dwfl_thread_state_registers) thread_state_registers;
  __typeof__(&dwfl_addrmodule) addrmodule;
  __typeof__(&dwfl_module_info) module_info;
  __typeof__(&dwfl_module_addrinfo) module_addrinfo;
  __typeof__(&dwfl_module_getsrc) module_getsrc;
  __typeof__(&dwfl_lineinfo) lineinfo;
  __typeof__(&dwfl_module_build_id) module_build_id;
  __typeof__(&dwfl_module_addrdie) module_addrdie;
  __typeof__(&dwarf_getscopes) getscopes;
  __typeof__(&dwarf_tag) tag;
  __typeof__(&dwarf_attr) attr;
  __typeof__(&dwarf_attr_integrate) attr_integrate;
  __typeof__(&dwarf_formref_die) formref_die;
  __typeof__(&dwarf_formstring) formstring;
  __typeof__(&dwarf_formudata) formudata;
  __typeof__(&dwarf_diename) diename;
  __typeof__(&dwarf_getsrcfiles) getsrcfiles;
  __typeof__(&dwarf_filesrc) filesrc;
} dw;
static pthread_once_t dw_once = PTHREAD_ONCE_INIT;
static int dw_loaded;

static void dw_load(void) {
  void *library = dlopen(FORSETTI_DEBUG_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) return;
  int missing = 0;
#define BIND(field, name)                                      \
  do {                                                         \
    dw.field = (__typeof__(dw.field))dlsym(library, #name);    \
    if (dw.field == NULL) missing = 1;                         \
  } while (0)
  BIND(begin, dwfl_begin);
  BIND(report_begin, dwfl_report_begin);
  BIND(report_elf, dwfl_report_elf);
  BIND(report_end, dwfl_report_end);
  BIND(end, dwfl_end);
  BIND(build_id_find_elf, dwfl_build_id_find_elf);
  BIND(standard_find_debuginfo, dwfl_standard_find_debuginfo);
  BIND(attach_state, dwfl_attach_state);
  BIND(getthread_frames, dwfl_getthread_frames);
  BIND(frame_pc, dwfl_frame_pc);
  BIND(thread_state_registers, dwfl_thread_state_registers);
  BIND(addrmodule, dwfl_addrmodule);
  BIND(module_info, dwfl_module_info);
  BIND(module_addrinfo, dwfl_module_addrinfo);
  BIND(module_getsrc, dwfl_module_getsrc);
  BIND(lineinfo, dwfl_lineinfo);
  BIND(module_build_id, dwfl_module_build_id);
  BIND(module_addrdie, dwfl_module_addrdie);
  BIND(getscopes, dwarf_getscopes);
  BIND(tag, dwarf_tag);
  BIND(attr, dwarf_attr);
  BIND(attr_integrate, dwarf_attr_integrate);
  BIND(formref_die, dwarf_formref_die);
  BIND(formstring, dwarf_formstring);
  BIND(formudata, dwarf_formudata);
  BIND(diename, dwarf_diename);
  BIND(getsrcfiles, dwarf_getsrcfiles);
  BIND(filesrc, dwarf_filesrc);
#undef BIND
  dw_loaded = !missing;
}

int forsetti_debug_load(void) { return pthread_once(&dw_once, dw_load) == 0 && dw_loaded; }

const char *forsetti_debug_library(void) { return FORSETTI_DEBUG_LIBRARY; }

static char *debuginfo_path = NULL;
static Dwfl_Callbacks callbacks;

Dwfl *forsetti_debug_begin(void) {
  if (!forsetti_debug_load()) return NULL;
  callbacks.find_elf = dw.build_id_find_elf;
  callbacks.find_debuginfo = dw.standard_find_debuginfo;
  callbacks.debuginfo_path = &debuginfo_path;
  Dwfl *d = dw.begin(&callbacks);
  if (d) dw.report_begin(d);
  return d;
}

int forsetti_debug_report(Dwfl *dwfl, const char *path, uint64_t bias) {
  return dw.report_elf(dwfl, path, path, -1, (GElf_Addr)bias, false) ? 0 : -1;
}

void forsetti_debug_report_end(Dwfl *dwfl) { dw.report_end(dwfl, NULL, NULL); }

void forsetti_debug_end(Dwfl *dwfl) {
  if (dwfl) dw.end(dwfl);
}

struct captured {
  const uint64_t *registers;
  uint64_t stack_start;
  const uint8_t *stack;
  size_t length;
  int given;
};

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_arg) {
  (void)dwfl;
  struct captured *c = arg;
  if (c->given) return 0;
  c->given = 1;
  *thread_arg = arg;
  return 1;
}

// Reads only the captured stack: every other address is unknown to the unwinder.
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg) {
  (void)dwfl;
  struct captured *c = arg;
  if (addr < c->stack_start) return false;
  uint64_t at = addr - c->stack_start;
  if (at > c->length || c->length - at < sizeof *result) return false;
  memcpy(result, c->stack + at, sizeof *result);
  return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *thread_arg) {
  struct captured *c = thread_arg;
  Dwarf_Word regs[17];
  for (int i = 0; i < 17; i++) regs[i] = c->registers[i];
  return dw.thread_state_registers(thread, 0, 17, regs);
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
    .next_thread = next_thread,
    .memory_read = memory_read,
    .set_initial_registers = set_initial_registers,
};

struct collected {
  uint64_t *pcs;
  uint8_t *activation;
  int max;
  int count;
};

static int on_frame(Dwfl_Frame *frame, void *arg) {
  struct collected *out = arg;
  Dwarf_Addr pc;
  bool is_activation;
  if (!dw.frame_pc(frame, &pc, &is_activation)) return DWARF_CB_ABORT;
  out->pcs[out->count] = pc;
  out->activation[out->count] = is_activation;
  out->count++;
  return out->count < out->max ? DWARF_CB_OK : DWARF_CB_ABORT;
}

int forsetti_debug_unwind(Dwfl *dwfl, const uint64_t *registers, uint64_t stack_start, const uint8_t *stack,
                          size_t length, uint64_t *pcs, uint8_t *activation, int max) {
  if (max <= 0) return 0;
  struct captured c = {registers, stack_start, stack, length, 0};
  struct collected out = {pcs, activation, max, 0};
  if (dw.attach_state(dwfl, NULL, 1, &thread_callbacks, &c)) dw.getthread_frames(dwfl, 1, on_frame, &out);
  if (out.count == 0) {
    // No unwinding at all: the one frame the registers name.
    pcs[0] = registers[16];
    activation[0] = 1;
    return 1;
  }
  return out.count;
}

static void inlines(Dwfl_Module *module, uint64_t address, struct forsetti_debug_place *out) {
  Dwarf_Addr bias = 0;
  Dwarf_Die *cu = dw.module_addrdie(module, address, &bias);
  if (cu == NULL) return;
  Dwarf_Die *scopes = NULL;
  int n = dw.getscopes(cu, address - bias, &scopes);
  Dwarf_Files *files = NULL;
  dw.getsrcfiles(cu, &files, NULL);
  for (int i = 0; i < n && out->inline_count < FORSETTI_DEBUG_INLINES; i++) {
    int tag = dw.tag(&scopes[i]);
    if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram) continue;
    Dwarf_Attribute attr;
    Dwarf_Die origin;
    Dwarf_Die *named = &scopes[i];
    if (dw.attr_integrate(&scopes[i], DW_AT_abstract_origin, &attr) && dw.formref_die(&attr, &origin))
      named = &origin;
    const char *name = NULL;
    if (dw.attr_integrate(named, DW_AT_linkage_name, &attr)) name = dw.formstring(&attr);
    if (name == NULL) name = dw.diename(named);
    int k = out->inline_count++;
    out->inline_function[k] = name;
    out->inline_call_file[k] = NULL;
    out->inline_call_line[k] = 0;
    if (tag == DW_TAG_inlined_subroutine) {
      Dwarf_Word file = 0, line = 0;
      if (dw.formudata(dw.attr(&scopes[i], DW_AT_call_file, &attr), &file) == 0 && files)
        out->inline_call_file[k] = dw.filesrc(files, file, NULL, NULL);
      if (dw.formudata(dw.attr(&scopes[i], DW_AT_call_line, &attr), &line) == 0) out->inline_call_line[k] = (int)line;
    }
    if (tag == DW_TAG_subprogram) break;
  }
  free(scopes);
}

void forsetti_debug_lookup(Dwfl *dwfl, uint64_t address, struct forsetti_debug_place *out) {
  memset(out, 0, sizeof *out);
  Dwfl_Module *module = dw.addrmodule(dwfl, address);
  if (module == NULL) return;
  out->file = dw.module_info(module, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
  GElf_Off offset = 0;
  GElf_Sym sym;
  Dwarf_Addr bias = 0;
  out->symbol = dw.module_addrinfo(module, address, &offset, &sym, NULL, NULL, &bias);
  out->symbol_offset = offset;
  Dwfl_Line *line = dw.module_getsrc(module, address);
  if (line) out->source = dw.lineinfo(line, NULL, &out->line, NULL, NULL, NULL);
  inlines(module, address, out);
  const unsigned char *bits = NULL;
  GElf_Addr vaddr = 0;
  int n = dw.module_build_id(module, &bits, &vaddr);
  if (n > 0 && bits) {
    out->build_id_length = n > 64 ? 64 : n;
    memcpy(out->build_id, bits, (size_t)out->build_id_length);
  }
  // The load bias, asked after the symbols were read (until then libdwfl may not know it).
  Dwarf_Addr symbias = 0;
  dw.module_info(module, NULL, NULL, NULL, NULL, &symbias, NULL, NULL);
  out->bias = symbias == (Dwarf_Addr)-1 ? bias : symbias;
}
