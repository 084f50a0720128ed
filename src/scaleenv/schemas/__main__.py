from scaleenv.schemas import write_all

write_all()
