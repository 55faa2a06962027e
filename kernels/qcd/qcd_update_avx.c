/* qcd_update_avx.c - the AVX build of the update and the plaquette (qcd_update_body.h):
 * compiled with -mavx2 and without FMA (CMakeLists.txt), chosen at run time by qcd_isa
 * where the CPU has AVX2. The same bits as the baseline build. */
#define QCD_VARIANT(name) name##_avx
#include "qcd_update_body.h"
