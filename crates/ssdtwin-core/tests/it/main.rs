mod engine;
mod ftl_physics;
