int forsetti_counter_entry(void) { return 1; }
int helper_export(int x) { return x + 2; }
__attribute__((visibility("hidden"))) int hidden_helper(void) { return 3; }
int exported_object = 4;
extern int imported_function(void);
int calls_import(void) { return imported_function(); }
__attribute__((section(".forsetti.manifest"), used)) static const char manifest[] =
  "{\"schemaVersion\":\"1.0\",\"moduleID\":\"com.example.seed\",\"displayName\":\"Seed\",\"moduleVersion\":\"1.0.0\",\"moduleType\":\"service\",\"supportedPlatforms\":[\"linux\"],\"minForsettiVersion\":\"0.1.0\",\"capabilitiesRequested\":[],\"entryPoint\":\"forsetti_counter_entry\"}";
