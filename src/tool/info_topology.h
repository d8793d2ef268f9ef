/* info_topology.h: `tfc info --topology` (src/tool/info_topology.c), called by `tfc info`. */
#ifndef TFC_TOOL_INFO_TOPOLOGY_H
#define TFC_TOOL_INFO_TOPOLOGY_H

/* Prints hwloc's view of the node and StarPU's workers; returns the command's exit status. */
int tool_topology(void);
extern const char tool_topology_usage[];

#endif
