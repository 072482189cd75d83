mod engine;
mod fio_goldens;
mod ftl_physics;
mod layers;
mod module_graph;
mod sets;
mod tenants;
