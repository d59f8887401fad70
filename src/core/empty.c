/* Placeholder translation unit for a layer that has no sources yet (keeps the
 * per-layer static libraries valid while the tree grows). */
typedef int lm_empty_translation_unit;
