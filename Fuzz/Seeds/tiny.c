int forsetti_tiny_entry(void){return 0;}
