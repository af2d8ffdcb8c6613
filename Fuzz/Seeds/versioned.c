int my_entry_v1(void) { return 1; }
int my_entry_v2(void) { return 2; }
int only_entry_v1(void) { return 3; }
__asm__(".symver my_entry_v1, my_entry@V1");
__asm__(".symver my_entry_v2, my_entry@@V2");
__asm__(".symver only_entry_v1, only_entry@V1");
