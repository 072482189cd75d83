mod ftl_physics;
